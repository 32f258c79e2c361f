-- The pages of one items child (its heap, in blocks): what decides whether
-- its tally is one statement or slices across passes.
SELECT (pg_relation_size($1::regclass) / current_setting('block_size')::int)::int8
