-- drover 0030 on SQLite: the outbox row carries its item's lane, priority
-- and attempt budget in columns of its own (the payload is the job's
-- exactly); a row written before (lane IS NULL) relays as it was written,
-- its lane the payload's "lane" entry. Ids are one primary key already.

ALTER TABLE outbox ADD COLUMN lane TEXT
    CHECK (lane IS NULL OR (length(lane) BETWEEN 1 AND 64 AND lane NOT GLOB '*[^a-z0-9_-]*'));
ALTER TABLE outbox ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
    CHECK (priority BETWEEN -32768 AND 32767);
ALTER TABLE outbox ADD COLUMN max_attempts INTEGER CHECK (max_attempts IS NULL OR max_attempts >= 1);

-- The claim's probe for a tenant's live claimed event rows.
CREATE INDEX outbox_claimed_events ON outbox (tenant_id)
    WHERE claim_token IS NOT NULL AND kind GLOB 'event.*';
