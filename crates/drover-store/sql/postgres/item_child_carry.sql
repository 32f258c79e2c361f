-- The survivors of the detached child {child} back into items: their ids are
-- in no child's window now, so they land in the default partition, each
-- row as it was (status, claim, token, attempts, times). {child} is a name
-- read from the catalog and checked by the caller.
INSERT INTO items
SELECT * FROM "{child}"
WHERE status IN ('pending', 'claimed') OR updated_at >= $1::timestamptz
