-- Appends events at the positions the head lock handed out, into the
-- ring's current child. Returns nothing the caller does not know.
INSERT INTO events (tenant_id, position, slot, id, topic, payload, actor, request_id, traceparent)
SELECT $1, e.position, (SELECT slot FROM event_slots WHERE current), e.id, e.topic, e.payload,
       e.actor, e.request_id, e.traceparent
FROM unnest($2::bigint[], $3::uuid[], $4::text[], $5::jsonb[], $6::uuid[], $7::text[], $8::text[])
     AS e(position, id, topic, payload, actor, request_id, traceparent)
