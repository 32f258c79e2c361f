//! The SQL of the PostgreSQL backend, one query per file under
//! `sql/postgres/`, embedded at compile time. Unqualified table names resolve
//! through the `search_path` every drover transaction sets.

/// `sql/postgres/audit_list.sql`.
pub(super) const AUDIT_LIST: &str = include_str!("../../sql/postgres/audit_list.sql");
/// `sql/postgres/counts.sql`.
pub(super) const COUNTS: &str = include_str!("../../sql/postgres/counts.sql");
/// `sql/postgres/counts_tenant.sql`.
pub(super) const COUNTS_TENANT: &str = include_str!("../../sql/postgres/counts_tenant.sql");
/// `sql/postgres/counts_mark.sql`.
pub(super) const COUNTS_MARK: &str = include_str!("../../sql/postgres/counts_mark.sql");
/// `sql/postgres/counts_settle_begin.sql`.
pub(super) const COUNTS_SETTLE_BEGIN: &str =
    include_str!("../../sql/postgres/counts_settle_begin.sql");
/// `sql/postgres/counts_settle.sql`.
pub(super) const COUNTS_SETTLE: &str = include_str!("../../sql/postgres/counts_settle.sql");
/// `sql/postgres/gauges_failed.sql`.
pub(super) const GAUGES_FAILED: &str = include_str!("../../sql/postgres/gauges_failed.sql");
/// `sql/postgres/gauges_oldest.sql`.
pub(super) const GAUGES_OLDEST: &str = include_str!("../../sql/postgres/gauges_oldest.sql");
/// `sql/postgres/insert_in_enter.sql`.
pub(super) const INSERT_IN_ENTER: &str = include_str!("../../sql/postgres/insert_in_enter.sql");
/// `sql/postgres/insert_in_leave.sql`.
pub(super) const INSERT_IN_LEAVE: &str = include_str!("../../sql/postgres/insert_in_leave.sql");
/// `sql/postgres/item_cancel.sql`.
pub(super) const ITEM_CANCEL: &str = include_str!("../../sql/postgres/item_cancel.sql");
/// `sql/postgres/item_cancel_claimed.sql`.
pub(super) const ITEM_CANCEL_CLAIMED: &str =
    include_str!("../../sql/postgres/item_cancel_claimed.sql");
/// `sql/postgres/item_claim.sql`.
pub(super) const ITEM_CLAIM: &str = include_str!("../../sql/postgres/item_claim.sql");
/// `sql/postgres/item_complete.sql`.
pub(super) const ITEM_COMPLETE: &str = include_str!("../../sql/postgres/item_complete.sql");
/// `sql/postgres/item_complete_many.sql`.
pub(super) const ITEM_COMPLETE_MANY: &str =
    include_str!("../../sql/postgres/item_complete_many.sql");
/// `sql/postgres/item_defer.sql`.
pub(super) const ITEM_DEFER: &str = include_str!("../../sql/postgres/item_defer.sql");
/// `sql/postgres/item_extend_lease.sql`.
pub(super) const ITEM_EXTEND_LEASE: &str = include_str!("../../sql/postgres/item_extend_lease.sql");
/// `sql/postgres/item_fail.sql`.
pub(super) const ITEM_FAIL: &str = include_str!("../../sql/postgres/item_fail.sql");
/// `sql/postgres/item_fail_orphaned.sql`.
pub(super) const ITEM_FAIL_ORPHANED: &str =
    include_str!("../../sql/postgres/item_fail_orphaned.sql");
/// `sql/postgres/item_find_collision.sql`.
pub(super) const ITEM_FIND_COLLISION: &str =
    include_str!("../../sql/postgres/item_find_collision.sql");
/// `sql/postgres/item_find_collisions.sql`.
pub(super) const ITEM_FIND_COLLISIONS: &str =
    include_str!("../../sql/postgres/item_find_collisions.sql");
/// `sql/postgres/item_complete_many_results.sql`.
pub(super) const ITEM_COMPLETE_MANY_RESULTS: &str =
    include_str!("../../sql/postgres/item_complete_many_results.sql");
/// `sql/postgres/item_progress.sql`.
pub(super) const ITEM_PROGRESS: &str = include_str!("../../sql/postgres/item_progress.sql");
/// `sql/postgres/item_get_active.sql`.
pub(super) const ITEM_GET_ACTIVE: &str = include_str!("../../sql/postgres/item_get_active.sql");
/// `sql/postgres/item_get.sql`.
pub(super) const ITEM_GET: &str = include_str!("../../sql/postgres/item_get.sql");
/// `sql/postgres/item_get_by_key.sql`.
pub(super) const ITEM_GET_BY_KEY: &str = include_str!("../../sql/postgres/item_get_by_key.sql");
/// `sql/postgres/item_insert.sql`.
pub(super) const ITEM_INSERT: &str = include_str!("../../sql/postgres/item_insert.sql");
/// `sql/postgres/item_insert_many.sql`.
pub(super) const ITEM_INSERT_MANY: &str = include_str!("../../sql/postgres/item_insert_many.sql");
/// `item_insert_many.sql` without its `ON CONFLICT DO NOTHING`: the bulk
/// enqueue's first try, which a taken id fails (see `items::Taken`).
pub(super) static ITEM_INSERT_MANY_PLAIN: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| ITEM_INSERT_MANY.replacen("ON CONFLICT DO NOTHING\n", "", 1));
/// `sql/postgres/item_insert_each.sql`.
pub(super) const ITEM_INSERT_EACH: &str = include_str!("../../sql/postgres/item_insert_each.sql");
/// `sql/postgres/item_list.sql`.
pub(super) const ITEM_LIST: &str = include_str!("../../sql/postgres/item_list.sql");
/// `sql/postgres/item_release.sql`.
pub(super) const ITEM_RELEASE: &str = include_str!("../../sql/postgres/item_release.sql");
/// `sql/postgres/item_requeue_stale.sql`.
pub(super) const ITEM_REQUEUE_STALE: &str =
    include_str!("../../sql/postgres/item_requeue_stale.sql");
/// `sql/postgres/item_retry.sql`.
pub(super) const ITEM_RETRY: &str = include_str!("../../sql/postgres/item_retry.sql");
/// `sql/postgres/item_stale_tenants.sql`.
pub(super) const ITEM_STALE_TENANTS: &str =
    include_str!("../../sql/postgres/item_stale_tenants.sql");
/// `sql/postgres/item_status.sql`.
pub(super) const ITEM_STATUS: &str = include_str!("../../sql/postgres/item_status.sql");
/// `sql/postgres/sweep_lease_take.sql`.
pub(super) const SWEEP_LEASE_TAKE: &str = include_str!("../../sql/postgres/sweep_lease_take.sql");
/// `sql/postgres/sweep_lease_renew.sql`.
pub(super) const SWEEP_LEASE_RENEW: &str = include_str!("../../sql/postgres/sweep_lease_renew.sql");
/// `sql/postgres/sweep_lease_release.sql`.
pub(super) const SWEEP_LEASE_RELEASE: &str =
    include_str!("../../sql/postgres/sweep_lease_release.sql");
/// `sql/postgres/sweep_last_pass.sql`.
pub(super) const SWEEP_LAST_PASS: &str = include_str!("../../sql/postgres/sweep_last_pass.sql");
/// `sql/postgres/worker_beat.sql`.
pub(super) const WORKER_BEAT: &str = include_str!("../../sql/postgres/worker_beat.sql");
/// `sql/postgres/worker_list.sql`.
pub(super) const WORKER_LIST: &str = include_str!("../../sql/postgres/worker_list.sql");
/// Deletes long-dead workers' rows.
pub(super) const WORKER_PURGE: &str = include_str!("../../sql/postgres/worker_purge.sql");
/// `sql/postgres/orchestration_insert.sql`.
pub(super) const ORCHESTRATION_INSERT: &str =
    include_str!("../../sql/postgres/orchestration_insert.sql");
/// `sql/postgres/orchestration_request_cancel.sql`.
pub(super) const ORCHESTRATION_REQUEST_CANCEL: &str =
    include_str!("../../sql/postgres/orchestration_request_cancel.sql");
/// `sql/postgres/orchestration_purge_signals_of.sql`.
pub(super) const ORCHESTRATION_PURGE_SIGNALS_OF: &str =
    include_str!("../../sql/postgres/orchestration_purge_signals_of.sql");
/// `sql/postgres/orchestration_purge.sql`.
pub(super) const ORCHESTRATION_PURGE: &str =
    include_str!("../../sql/postgres/orchestration_purge.sql");
/// `sql/postgres/orchestration_purge_consumed.sql`.
pub(super) const ORCHESTRATION_PURGE_CONSUMED: &str =
    include_str!("../../sql/postgres/orchestration_purge_consumed.sql");
/// `sql/postgres/orchestration_find_collision.sql`.
pub(super) const ORCHESTRATION_FIND_COLLISION: &str =
    include_str!("../../sql/postgres/orchestration_find_collision.sql");
/// `sql/postgres/orchestration_get.sql`.
pub(super) const ORCHESTRATION_GET: &str = include_str!("../../sql/postgres/orchestration_get.sql");
/// `sql/postgres/orchestration_lock.sql`.
pub(super) const ORCHESTRATION_LOCK: &str =
    include_str!("../../sql/postgres/orchestration_lock.sql");
/// `sql/postgres/orchestration_list.sql`.
pub(super) const ORCHESTRATION_LIST: &str =
    include_str!("../../sql/postgres/orchestration_list.sql");
/// `sql/postgres/orchestration_update.sql`.
pub(super) const ORCHESTRATION_UPDATE: &str =
    include_str!("../../sql/postgres/orchestration_update.sql");
/// `sql/postgres/orchestration_due.sql`.
pub(super) const ORCHESTRATION_DUE: &str = include_str!("../../sql/postgres/orchestration_due.sql");
/// `sql/postgres/orchestration_dead_steps.sql`.
pub(super) const ORCHESTRATION_DEAD_STEPS: &str =
    include_str!("../../sql/postgres/orchestration_dead_steps.sql");
/// `sql/postgres/orchestration_parked_count.sql`.
pub(super) const ORCHESTRATION_PARKED_COUNT: &str =
    include_str!("../../sql/postgres/orchestration_parked_count.sql");
/// `sql/postgres/orchestration_signal_insert.sql`.
pub(super) const ORCHESTRATION_SIGNAL_INSERT: &str =
    include_str!("../../sql/postgres/orchestration_signal_insert.sql");
/// `sql/postgres/orchestration_signal_pending.sql`.
pub(super) const ORCHESTRATION_SIGNAL_PENDING: &str =
    include_str!("../../sql/postgres/orchestration_signal_pending.sql");
/// `sql/postgres/orchestration_signal_consume.sql`.
pub(super) const ORCHESTRATION_SIGNAL_CONSUME: &str =
    include_str!("../../sql/postgres/orchestration_signal_consume.sql");
/// `sql/postgres/orchestration_signal_list.sql`.
pub(super) const ORCHESTRATION_SIGNAL_LIST: &str =
    include_str!("../../sql/postgres/orchestration_signal_list.sql");
/// `sql/postgres/migrate_lock_schema.sql`.
pub(super) const MIGRATE_LOCK_SCHEMA: &str =
    include_str!("../../sql/postgres/migrate_lock_schema.sql");
/// `sql/postgres/migrate_unlock_schema.sql`.
pub(super) const MIGRATE_UNLOCK_SCHEMA: &str =
    include_str!("../../sql/postgres/migrate_unlock_schema.sql");
/// `sql/postgres/migrations_status.sql` (`{schema}` spliced in).
pub(super) const MIGRATIONS_STATUS: &str = include_str!("../../sql/postgres/migrations_status.sql");

/// The migration versions read from the table itself (schemas migrated
/// before the function existed).
pub(super) const MIGRATIONS_STATUS_TABLE: &str =
    include_str!("../../sql/postgres/migrations_status_table.sql");
/// `sql/postgres/db_oldest_xact_age.sql`.
pub(super) const DB_OLDEST_XACT_AGE: &str =
    include_str!("../../sql/postgres/db_oldest_xact_age.sql");
/// `sql/postgres/table_garbage.sql` (`{schema}` spliced in).
pub(super) const TABLE_GARBAGE: &str = include_str!("../../sql/postgres/table_garbage.sql");
/// `sql/postgres/table_vacuum_check.sql` (`{schema}`, `{table}` spliced in).
pub(super) const TABLE_VACUUM_CHECK: &str =
    include_str!("../../sql/postgres/table_vacuum_check.sql");
/// `sql/postgres/table_vacuum.sql` (`{table}`: the quoted qualified name).
pub(super) const TABLE_VACUUM: &str = include_str!("../../sql/postgres/table_vacuum.sql");
/// `sql/postgres/table_vacuum_after.sql` (`{schema}`, `{table}` spliced in).
pub(super) const TABLE_VACUUM_AFTER: &str =
    include_str!("../../sql/postgres/table_vacuum_after.sql");
/// `sql/postgres/minutes_by_minute.sql`.
pub(super) const MINUTES_BY_MINUTE: &str = include_str!("../../sql/postgres/minutes_by_minute.sql");
/// `sql/postgres/minutes_by_lane_kind.sql`.
pub(super) const MINUTES_BY_LANE_KIND: &str =
    include_str!("../../sql/postgres/minutes_by_lane_kind.sql");
/// `sql/postgres/items_running.sql`.
pub(super) const ITEMS_RUNNING: &str = include_str!("../../sql/postgres/items_running.sql");
/// `sql/postgres/waits_record.sql`.
pub(super) const WAITS_RECORD: &str = include_str!("../../sql/postgres/waits_record.sql");
/// `sql/postgres/waits_purge.sql`.
pub(super) const WAITS_PURGE: &str = include_str!("../../sql/postgres/waits_purge.sql");
/// `sql/postgres/waits_since.sql`.
pub(super) const WAITS_SINCE: &str = include_str!("../../sql/postgres/waits_since.sql");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_bulk_insert_is_the_bulk_insert_without_its_arbiter() {
        assert!(ITEM_INSERT_MANY.contains("ON CONFLICT DO NOTHING"));
        assert!(!ITEM_INSERT_MANY_PLAIN.contains("ON CONFLICT"));
        assert_eq!(
            ITEM_INSERT_MANY_PLAIN.len(),
            ITEM_INSERT_MANY.len() - "ON CONFLICT DO NOTHING\n".len()
        );
    }
}
