-- The cells still ahead of the clock ?1 (micros): the only ones that can
-- hold a start back (a cell behind the clock is an idle one).
SELECT key, tat FROM rate_cells WHERE tat > ?1
