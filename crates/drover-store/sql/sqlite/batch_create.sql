-- A new batch, open and empty; an existing id inserts nothing.
INSERT INTO batches (tenant_id, id, callback_kind, callback_lane, callback_payload,
                     fire_when, callback_id, created_by, created_at, touched_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
ON CONFLICT DO NOTHING
RETURNING *
