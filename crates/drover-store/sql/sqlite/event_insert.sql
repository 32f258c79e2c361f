-- Appends one event at the position the writer handed out.
INSERT INTO events (tenant_id, position, id, topic, payload, actor, request_id, traceparent, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
