-- The items children to drop now, oldest first: those whose window ended
-- before $1, the retention cutoff (every row they hold was created before
-- it), and those whose window ended over a minute ago and that hold no row
-- at all (the legacy child of a new installation, a quiet window): every
-- child costs every unpruned statement an index descent. The legacy
-- child's open start reads as the nil id.
SELECT c.name, coalesce(c.lo_id, '00000000-0000-0000-0000-000000000000'::uuid) AS lo_id, c.hi_id
FROM items_children() AS c
WHERE c.hi <= $1::timestamptz
   OR (c.hi < now() - interval '1 minute'
       AND NOT EXISTS (SELECT 1 FROM items i
                       WHERE i.id >= coalesce(c.lo_id, '00000000-0000-0000-0000-000000000000'::uuid)
                         AND i.id < c.hi_id))
ORDER BY c.hi_id
