-- Moves the count rollup's mark to ?1 (after counts_settle.sql, in its
-- transaction). Never backwards: a clock step back leaves it where it is.
UPDATE item_counts_mark SET settled_to = ?1 WHERE id = 1 AND settled_to < ?1
