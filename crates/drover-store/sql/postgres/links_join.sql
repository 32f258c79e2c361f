-- Members join an open batch: counted into its total, each member row
-- written (and its item marked linked by links_mark.sql). No row back:
-- the batch is unknown to the tenant or sealed.
WITH b AS (
    UPDATE batches SET total = total + cardinality($3::uuid[])
    WHERE tenant_id = $1 AND id = $2 AND NOT sealed
    RETURNING id
), m AS (
    INSERT INTO batch_members (tenant_id, item_id, batch_id)
    SELECT $1, x, $2 FROM unnest($3::uuid[]) AS t(x)
    WHERE EXISTS (SELECT 1 FROM b)
)
SELECT id FROM b
