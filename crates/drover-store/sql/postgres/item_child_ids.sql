-- The first and last id of the detached child {child}, through its primary
-- key: the range its items' key rows are purged over once it is dropped
-- (uuid has no min() or max() here). {child} is a name read from the
-- catalog and checked by the caller.
SELECT (SELECT id FROM "{child}" ORDER BY id LIMIT 1) AS lo,
       (SELECT id FROM "{child}" ORDER BY id DESC LIMIT 1) AS hi
