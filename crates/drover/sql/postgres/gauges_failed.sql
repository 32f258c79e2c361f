-- Items in the dead letter. System role.
SELECT count(*) AS failed FROM items WHERE status = 'failed'
