-- Deletes up to $1 cells behind the clock by more than the grace $2
-- (microseconds; CELL_GRACE in rates.rs): an idle cell is the same as
-- none. The grace keeps a cell a claim that began before its time may
-- still lock (such a claim admits on its older clock); a claim older than
-- the grace at its lock admits nothing (rate_cells_lock.sql). The clock
-- is compared on the target row itself, so a cell a claim locked and
-- moved ahead meanwhile is re-checked on its new version after that
-- claim commits, and kept: a purge never resets a live cell.
DELETE FROM rate_cells AS c
WHERE c.tenant_id = '00000000-0000-0000-0000-000000000000'
  AND c.tat < now() - make_interval(secs => $2::bigint / 1e6)
  AND c.key IN (
      SELECT i.key FROM rate_cells AS i
      WHERE i.tenant_id = '00000000-0000-0000-0000-000000000000'
        AND i.tat < now() - make_interval(secs => $2::bigint / 1e6)
      LIMIT $1)
