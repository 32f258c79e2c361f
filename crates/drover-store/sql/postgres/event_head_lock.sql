-- Takes the tenant's head row lock, held until the appender commits or rolls
-- back: the next appender of the tenant waits here, then reads the head the
-- earlier one committed. This is what keeps positions in commit order.
SELECT head FROM event_heads WHERE tenant_id = $1 FOR UPDATE
