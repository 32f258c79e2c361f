-- Detach ($2 false) or drop ($2 true) the items child $1 (the function of
-- migration 0026; system role).
SELECT items_child_end($1, $2)
