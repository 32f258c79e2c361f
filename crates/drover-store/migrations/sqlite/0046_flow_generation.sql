-- drover 0046 on SQLite: the flow settings' generation, as on PostgreSQL:
-- one row, moved by every change of the rates in force or the closures in
-- the transaction of the change, read by every claim on the single
-- writer's transaction, so a claim in any process over the same file
-- never claims past a closure that committed before it began.

CREATE TABLE flow_generation (
    id  INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    gen INTEGER NOT NULL
) STRICT;

INSERT INTO flow_generation (id, gen) VALUES (1, 1);
