-- One audit entry. ?1 tenant_id, ?2 item_id, ?3 action, ?4 actor, ?5 detail, ?6 at.
INSERT INTO audit (tenant_id, item_id, action, actor, detail, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
