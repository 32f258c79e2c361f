-- One item's runs (migration 0040), newest first. Runtime role under the
-- item's tenant: row-level security keeps other tenants' runs out. $1 item_id.
SELECT claim_seq, worker, started_at, finished_at, outcome, error FROM item_runs
WHERE item_id = $1
ORDER BY claim_seq DESC
