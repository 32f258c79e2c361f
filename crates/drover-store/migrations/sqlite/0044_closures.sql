-- drover 0044 on SQLite: closing a group or a kind until a time, as on
-- PostgreSQL: a closure is a rate cell keyed `...@closed` whose tat
-- (micros) is the time it reopens, with who closed it (closed_by, 16
-- bytes; NULL on a cell that is not a closure) and the item whose
-- handler closed it (closed_by_item; NULL: an operator).

ALTER TABLE rate_cells ADD COLUMN closed_by BLOB;
ALTER TABLE rate_cells ADD COLUMN closed_by_item BLOB;

CREATE INDEX rate_cells_closed ON rate_cells (tat) WHERE closed_by IS NOT NULL;
