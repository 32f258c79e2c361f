-- The items children whose window ended before $1, the retention cutoff:
-- every row they hold was created before it. Oldest first; the legacy
-- child's open start reads as the nil id.
SELECT name, coalesce(lo_id, '00000000-0000-0000-0000-000000000000'::uuid) AS lo_id, hi_id
FROM items_children()
WHERE hi <= $1::timestamptz
ORDER BY hi_id
