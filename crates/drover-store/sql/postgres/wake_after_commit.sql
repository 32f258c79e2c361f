-- The wake-ups of the store's own enqueues that committed (migration
-- 0053): one NOTIFY per lane of $2, its payload as the trigger's
-- ('<schema>:<lane>#<nonce>', $1 the schema) with the nonce of $3 the
-- store gave its own workers at the commit, in a transaction that does
-- not wait for its commit's WAL flush, so it holds the notify lock for an
-- instant. A wake-up lost in a crash costs the listeners one poll.
SELECT set_config('synchronous_commit', 'off', true),
       pg_notify('drover_wake', $1 || ':' || l || '#' || n)
FROM unnest($2::text[], $3::text[]) AS t(l, n)
