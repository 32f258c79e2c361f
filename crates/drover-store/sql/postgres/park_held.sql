-- The groups of the kinds $1 holding slots (their claimed items), with how
-- many each holds. System role.
SELECT tenant_id, kind, group_key, count(*) AS held
FROM items
WHERE status = 'claimed' AND group_key IS NOT NULL AND kind = ANY($1::text[])
GROUP BY tenant_id, kind, group_key
