-- Every lane with a recorded state, by name. System role; $1 tenant_id (nil).
SELECT lane, paused, changed_at, changed_by
FROM lane_states
WHERE tenant_id = $1
ORDER BY lane
