-- The cells of the keys ?1 (a JSON array) still ahead of the clock ?2
-- (micros): what holds one item's start back now ("why is it waiting").
SELECT key, tat FROM rate_cells
WHERE key IN (SELECT value FROM json_each(?1)) AND tat > ?2
