-- One item's runs (migration 0040), newest first. ?1 tenant_id, ?2 item_id.
SELECT claim_seq, worker, started_at, finished_at, outcome, error FROM item_runs
WHERE tenant_id = ?1 AND item_id = ?2
ORDER BY claim_seq DESC
