-- The flow settings' generation (migration 0046); no row: none kept.
SELECT gen FROM flow_generation
