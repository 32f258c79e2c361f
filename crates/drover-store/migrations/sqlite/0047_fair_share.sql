-- drover 0047 on SQLite: weighted fair share between tenants inside each
-- lane, as on PostgreSQL (weights per tenant, lanes turned off, and the
-- stride scheduler's passes per lane and tenant, the lane's virtual time
-- under the max UUID, ffffffff-ffff-ffff-ffff-ffffffffffff). The claim runs on the single writer, so reading,
-- sharing and writing the passes with the claim are one step.

CREATE TABLE fair_weights (
    tenant_id BLOB    NOT NULL PRIMARY KEY CHECK (length(tenant_id) = 16),
    weight    INTEGER NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    set_at    INTEGER NOT NULL,
    set_by    BLOB    NOT NULL CHECK (length(set_by) = 16)
) STRICT;

CREATE TABLE fair_lanes (
    lane   TEXT    NOT NULL PRIMARY KEY,
    fair   INTEGER NOT NULL CHECK (fair IN (0, 1)),
    set_at INTEGER NOT NULL,
    set_by BLOB    NOT NULL CHECK (length(set_by) = 16)
) STRICT;

CREATE TABLE fair_passes (
    lane      TEXT    NOT NULL,
    tenant_id BLOB    NOT NULL CHECK (length(tenant_id) = 16),
    pass      INTEGER NOT NULL,
    started   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, tenant_id)
) STRICT;

CREATE INDEX items_fair ON items (lane, tenant_id, priority, available_at) WHERE status = 'pending';
