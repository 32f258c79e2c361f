-- System role: a runner of projector $1 is alive now.
INSERT INTO projector_runners (projector, seen_at) VALUES ($1, now())
ON CONFLICT (projector) DO UPDATE SET seen_at = now()
