-- drover 0044: closing a group or a kind until a time
-- (docs/flow-control.md, "Closing a group").
--
-- A closure is a rate cell (migration 0043) whose tat is the time the
-- scope reopens, keyed `kind:<kind>@closed` or
-- `group:<kind>:<tenant>:<group>@closed`: the claim admits through it as
-- through any cell, and the sweep collects it once its time has passed. No
-- new table: rate_cells keeps its RLS (enabled and forced, system role
-- only for writes). closed_by is the actor that closed it (NULL on every
-- cell that is not a closure, which the partial index leaves out) and
-- closed_by_item the item whose handler closed it (NULL: an operator).

ALTER TABLE rate_cells ADD COLUMN closed_by uuid;
ALTER TABLE rate_cells ADD COLUMN closed_by_item uuid;

CREATE INDEX rate_cells_closed ON rate_cells (tat) WHERE closed_by IS NOT NULL;
