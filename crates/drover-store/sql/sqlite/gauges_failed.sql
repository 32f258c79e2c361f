-- Items in the dead letter.
SELECT count(*) FROM items WHERE status = 'failed'
