-- One member row. ?1 tenant, ?2 item, ?3 batch.
INSERT INTO batch_members (tenant_id, item_id, batch_id) VALUES (?1, ?2, ?3)
