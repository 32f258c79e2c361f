-- drover 0054: the rules of the columns only an insert writes are checked
-- where those columns are written, not on every update of the row.
--
-- PostgreSQL evaluates every CHECK constraint of a row on every UPDATE,
-- whatever columns the UPDATE sets, and parses each constraint's
-- expression again for every statement that writes the table. A claim and
-- a completion set status, token, lease and times; the kind and lane name
-- rules (two translate() calls, about 1 us a row) and the bounds of
-- max_attempts and the idempotency key were checked again on each.
-- Measured with scripts/bounds-ladder.sh (the raw drain's statements on a
-- table with items' indexes, then with its checks as well): the checks
-- took the drain from 57,786 to 45,886 rows/s, the insert from 117,799 to
-- 89,600 (medians of 5 runs).
--
-- The four rules of insert-only columns move into one AFTER ROW trigger
-- on INSERT and on an UPDATE that names one of those columns, fired only
-- when a rule fails (its WHEN is the rules' negation, so a valid row
-- queues nothing): it raises check_violation with the constraint's old
-- name, so a bad row is refused as before, by the statement that wrote
-- it. An AFTER trigger, not a BEFORE one: a BEFORE UPDATE row trigger
-- makes every UPDATE lock its row first, whether it fires or not. The
-- rules of the columns a claim and its fenced writes set (status, the
-- claim's fields, attempts, claim_seq, last_error) stay CHECK
-- constraints.
--
-- Every table of the items tree drops the four (a partition that was a
-- table of its own, items_legacy, and a child prepared from LIKE items,
-- keep a local copy when the parent's goes); children prepared from now
-- on copy none, and every partition gets the trigger from the parent.

CREATE FUNCTION items_insert_rules_failed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_rule text;
BEGIN
    v_rule := CASE
        WHEN NOT (length(NEW.kind) BETWEEN 1 AND 128
                  AND translate(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.:-', '') = '')
            THEN 'items_kind_name'
        WHEN NOT (length(NEW.lane) BETWEEN 1 AND 64
                  AND translate(NEW.lane, 'abcdefghijklmnopqrstuvwxyz0123456789_-', '') = '')
            THEN 'items_lane_name'
        WHEN NOT (NEW.max_attempts >= 1) THEN 'items_max_attempts_positive'
        ELSE 'items_key_bounded'
    END;
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, v_rule
        USING ERRCODE = 'check_violation', CONSTRAINT = v_rule,
              SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
END $$;

CREATE TRIGGER items_insert_rules AFTER INSERT OR UPDATE OF kind, lane, max_attempts, idempotency_key
    ON items FOR EACH ROW
    WHEN (NOT (length(NEW.kind) BETWEEN 1 AND 128
               AND translate(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.:-', '') = ''
               AND length(NEW.lane) BETWEEN 1 AND 64
               AND translate(NEW.lane, 'abcdefghijklmnopqrstuvwxyz0123456789_-', '') = ''
               AND NEW.max_attempts >= 1
               AND coalesce(octet_length(NEW.idempotency_key) BETWEEN 1 AND 512, true)))
    EXECUTE FUNCTION items_insert_rules_failed();

ALTER TABLE items
    DROP CONSTRAINT items_kind_name,
    DROP CONSTRAINT items_lane_name,
    DROP CONSTRAINT items_max_attempts_positive,
    DROP CONSTRAINT items_key_bounded;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.conname, c.conrelid::regclass AS rel
        FROM pg_constraint c
        JOIN pg_class t ON t.oid = c.conrelid
        WHERE t.relnamespace = current_schema()::regnamespace
          AND c.contype = 'c'
          AND c.conname IN ('items_kind_name', 'items_lane_name',
                            'items_max_attempts_positive', 'items_key_bounded')
    LOOP
        EXECUTE format('ALTER TABLE ONLY %s DROP CONSTRAINT %I', r.rel, r.conname);
    END LOOP;
END $$;
