-- One edge of a linked enqueue. ?1 tenant, ?2 dependency, ?3 dependant,
-- ?4 policy, ?5 resolved already.
INSERT INTO item_deps (tenant_id, dep_id, item_id, policy, resolved) VALUES (?1, ?2, ?3, ?4, ?5)
