-- Deletes up to ?2 cells behind ?1 (micros: the clock less CELL_GRACE in
-- rates.rs, as on PostgreSQL): an idle cell is the same as none. On the
-- single writer, so no claim moves a cell meanwhile.
DELETE FROM rate_cells
WHERE key IN (SELECT key FROM rate_cells WHERE tat < ?1 LIMIT ?2)
