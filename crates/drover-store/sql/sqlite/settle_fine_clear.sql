-- Empties the settlement's scratch table (after both folds).
DELETE FROM temp.settle_fine
