-- Parked and stuck records across tenants (system role), for the
-- drover_records_parked gauge.
SELECT count(*) FROM orchestrations WHERE status IN ('parked', 'stuck')
