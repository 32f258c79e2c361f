-- The groups of the kinds ?1 (a JSON array) holding slots (their claimed
-- items), with how many each holds. The claimed set is small
-- (items_claimed_lease). System operation.
SELECT tenant_id, kind, group_key, count(*) AS held
FROM items
WHERE status = 'claimed' AND group_key IS NOT NULL
  AND kind IN (SELECT value FROM json_each(?1))
GROUP BY tenant_id, kind, group_key
