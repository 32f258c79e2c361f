-- The settlement's scratch table (connection-local, so never shared): the
-- final rows of one settlement range grouped once, by minute, tenant, lane,
-- kind and status, for both rollups to fold from.
CREATE TEMP TABLE IF NOT EXISTS settle_fine (
    minute    INTEGER NOT NULL,
    tenant_id BLOB    NOT NULL,
    lane      TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    status    TEXT    NOT NULL,
    n         INTEGER NOT NULL,
    ms_sum    INTEGER NOT NULL,
    ms_max    INTEGER NOT NULL
)
