-- drover 0022: every wake-up carries a nonce that all its listeners share.
--
-- Workers sharing a lane all hear the same NOTIFY; left to arrival order,
-- the first to claim takes everything it announced, nearly always the same
-- worker. With the sending transaction's id in the payload
-- ('<schema>:<lane>#<txid>'), every listener in every process reads the same
-- number and the workers of a lane agree, without talking, on which of them
-- claims at once (docs/design.md, "How do idle workers share a trickle?").
-- Identical payloads of one transaction still fold into one notification.
-- A listener older than this migration reads '<lane>#<txid>' as a lane it
-- does not drain and falls back to its poll until it is upgraded.

CREATE OR REPLACE FUNCTION items_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':' || lane || '#' || txid_current())
    FROM (SELECT DISTINCT lane FROM new_rows) AS lanes;
    RETURN NULL;
END $$;

-- The relay ignores the nonce; it keeps the payload's form the same as the
-- lanes' so one parser reads both.
CREATE OR REPLACE FUNCTION outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':drover.outbox#' || txid_current());
    RETURN NULL;
END $$;
