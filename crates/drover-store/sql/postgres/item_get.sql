-- One item by id (under the tenant set for the transaction).
SELECT * FROM items WHERE id = $1
