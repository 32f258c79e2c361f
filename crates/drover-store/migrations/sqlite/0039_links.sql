-- drover 0039: dependencies and batches (docs/dependencies.md), as
-- PostgreSQL's 0039. A dependant waits as a pending row at available_at
-- 253402214400000000 (9999-12-31, in microseconds): the claim never
-- reaches it. An item with dependants or in a batch carries `linked`; the
-- trigger below runs only for such a row, in the statement that makes it
-- final, so its release and its batch count commit with that write. The
-- store's connections run with recursive_triggers on, so a dependant
-- dead-lettered by this trigger finishes its own dependants in turn.
-- "Now" inside the triggers is the finishing write's updated_at (the
-- store's clock).

ALTER TABLE items ADD COLUMN linked INTEGER NOT NULL DEFAULT 0 CHECK (linked IN (0, 1));

CREATE TABLE item_deps (
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    dep_id    BLOB    NOT NULL CHECK (length(dep_id) = 16),
    item_id   BLOB    NOT NULL CHECK (length(item_id) = 16),
    policy    TEXT    NOT NULL CHECK (policy IN ('fail', 'run', 'wait')),
    resolved  INTEGER NOT NULL DEFAULT 0 CHECK (resolved IN (0, 1)),
    PRIMARY KEY (dep_id, item_id)
) STRICT;
CREATE INDEX item_deps_item ON item_deps (item_id);

CREATE TABLE item_waits (
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    item_id   BLOB    NOT NULL PRIMARY KEY CHECK (length(item_id) = 16),
    deps_left INTEGER NOT NULL CHECK (deps_left >= 0),
    run_at    INTEGER
) STRICT;

CREATE TABLE batches (
    tenant_id        BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    id               BLOB    NOT NULL CHECK (length(id) = 16),
    callback_kind    TEXT    NOT NULL,
    callback_lane    TEXT    NOT NULL,
    callback_payload TEXT    NOT NULL CHECK (json_valid(callback_payload)),
    fire_when        TEXT    NOT NULL CHECK (fire_when IN ('always', 'success', 'failure')),
    callback_id      BLOB    NOT NULL CHECK (length(callback_id) = 16),
    sealed           INTEGER NOT NULL DEFAULT 0,
    fired            INTEGER NOT NULL DEFAULT 0,
    total            INTEGER NOT NULL DEFAULT 0,
    done             INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    cancelled        INTEGER NOT NULL DEFAULT 0,
    created_by       BLOB    NOT NULL,
    created_at       INTEGER NOT NULL,
    touched_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id),
    CHECK (done >= 0 AND failed >= 0 AND cancelled >= 0 AND done + failed + cancelled <= total),
    CHECK (NOT fired OR sealed)
) STRICT;

CREATE TABLE batch_members (
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    item_id   BLOB    NOT NULL PRIMARY KEY CHECK (length(item_id) = 16),
    batch_id  BLOB    NOT NULL CHECK (length(batch_id) = 16),
    counted   INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX batch_members_batch ON batch_members (tenant_id, batch_id);

CREATE TRIGGER items_linked_final AFTER UPDATE OF status ON items
WHEN NEW.linked AND NEW.status IN ('done', 'failed', 'cancelled') AND OLD.status <> NEW.status
BEGIN
    -- Edges this finish resolves: count down, release at zero.
    UPDATE item_waits SET deps_left = deps_left - 1
    WHERE item_id IN (SELECT item_id FROM item_deps
                      WHERE dep_id = NEW.id AND NOT resolved
                        AND (NEW.status = 'done' OR policy = 'run'));
    UPDATE items
    SET available_at = max(NEW.updated_at,
                           coalesce((SELECT run_at FROM item_waits w WHERE w.item_id = items.id),
                                    NEW.updated_at)),
        updated_at = NEW.updated_at
    WHERE id IN (SELECT d.item_id FROM item_deps d JOIN item_waits w ON w.item_id = d.item_id
                 WHERE d.dep_id = NEW.id AND NOT d.resolved
                   AND (NEW.status = 'done' OR d.policy = 'run') AND w.deps_left = 0)
      AND status = 'pending' AND available_at = 253402214400000000;
    UPDATE item_deps SET resolved = 1
    WHERE dep_id = NEW.id AND NOT resolved AND (NEW.status = 'done' OR policy = 'run');

    -- Dependants this failure fails (policy `fail`), with their audit entry.
    UPDATE items
    SET status = 'failed',
        last_error = 'dependency ' || lower(substr(hex(NEW.id), 1, 8) || '-' || substr(hex(NEW.id), 9, 4)
                     || '-' || substr(hex(NEW.id), 13, 4) || '-' || substr(hex(NEW.id), 17, 4)
                     || '-' || substr(hex(NEW.id), 21, 12)) || ' ended ' || NEW.status,
        updated_at = NEW.updated_at,
        updated_by = zeroblob(16)
    WHERE NEW.status <> 'done'
      AND id IN (SELECT item_id FROM item_deps
                 WHERE dep_id = NEW.id AND NOT resolved AND policy = 'fail')
      AND status = 'pending' AND available_at = 253402214400000000;
    INSERT INTO audit (tenant_id, item_id, action, actor, detail, at)
    SELECT i.tenant_id, i.id, 'dead_letter', zeroblob(16), i.last_error, NEW.updated_at
    FROM item_deps d JOIN items i ON i.id = d.item_id
    WHERE NEW.status <> 'done' AND d.dep_id = NEW.id AND NOT d.resolved AND d.policy = 'fail'
      AND i.status = 'failed' AND i.updated_at = NEW.updated_at;
    UPDATE item_deps SET resolved = 1
    WHERE NEW.status <> 'done' AND dep_id = NEW.id AND NOT resolved AND policy = 'fail';

    -- The batch it belongs to: counted once, at its first final status.
    UPDATE batches
    SET done = done + (NEW.status = 'done'),
        failed = failed + (NEW.status = 'failed'),
        cancelled = cancelled + (NEW.status = 'cancelled'),
        touched_at = NEW.updated_at
    WHERE (tenant_id, id) IN (SELECT tenant_id, batch_id FROM batch_members
                              WHERE item_id = NEW.id AND NOT counted);
    UPDATE batch_members SET counted = 1 WHERE item_id = NEW.id AND NOT counted;
END;

-- A sealed batch whose members are all final: the callback decision, once.
CREATE TRIGGER batches_fire AFTER UPDATE ON batches
WHEN NEW.sealed AND NOT NEW.fired AND NEW.done + NEW.failed + NEW.cancelled = NEW.total
BEGIN
    UPDATE batches SET fired = 1 WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
    INSERT INTO items (
        id, tenant_id, kind, lane, payload, priority, status, available_at,
        attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by
    )
    SELECT NEW.callback_id, NEW.tenant_id, NEW.callback_kind, NEW.callback_lane,
           json_object('batch', lower(substr(hex(NEW.id), 1, 8) || '-' || substr(hex(NEW.id), 9, 4)
                                || '-' || substr(hex(NEW.id), 13, 4) || '-' || substr(hex(NEW.id), 17, 4)
                                || '-' || substr(hex(NEW.id), 21, 12)),
                       'done', NEW.done, 'failed', NEW.failed, 'cancelled', NEW.cancelled,
                       'payload', json(NEW.callback_payload)),
           0, 'pending', NEW.touched_at, 0, 5, 0, NEW.created_by, NEW.touched_at, NEW.touched_at,
           NEW.created_by
    WHERE NEW.fire_when = 'always'
       OR (NEW.fire_when = 'success' AND NEW.failed + NEW.cancelled = 0)
       OR (NEW.fire_when = 'failure' AND NEW.failed + NEW.cancelled > 0)
    ON CONFLICT DO NOTHING;
END;
