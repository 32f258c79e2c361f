-- System: a runner of projector ?1 is alive at ?2 (microseconds).
INSERT INTO projector_runners (projector, seen_at) VALUES (?1, ?2)
ON CONFLICT (projector) DO UPDATE SET seen_at = excluded.seen_at
