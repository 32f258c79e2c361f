-- One item by idempotency key (under the tenant set for the transaction).
SELECT * FROM items WHERE idempotency_key = $1
