-- On the error path of a fenced write: does the item exist at all?
SELECT status FROM items WHERE id = $1
