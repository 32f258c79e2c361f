//! The SQL of the SQLite backend: one named file per statement under
//! `sql/sqlite/`, embedded at compile time so the binary carries no loose
//! query files and a typo in a file name fails the build.

macro_rules! sql {
    ($name:ident, $file:literal) => {
        #[doc = concat!("`sql/sqlite/", $file, "`.")]
        pub(super) const $name: &str =
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/sqlite/", $file));
    };
}

sql!(ITEM_INSERT, "item_insert.sql");
sql!(ITEM_INSERT_MANY, "item_insert_many.sql");
sql!(ITEM_INSERT_ROW, "item_insert_row.sql");
sql!(ITEM_INSERT_MANY_RETURNING, "item_insert_many_returning.sql");
sql!(SAVEPOINT_BEGIN, "savepoint_begin.sql");
sql!(SAVEPOINT_ROLLBACK, "savepoint_rollback.sql");
sql!(SAVEPOINT_RELEASE, "savepoint_release.sql");
sql!(ITEM_GET, "item_get.sql");
sql!(ITEM_GET_BY_KEY, "item_get_by_key.sql");
sql!(ITEM_GET_ACTIVE, "item_get_active.sql");
sql!(ITEM_EXISTS, "item_exists.sql");
sql!(ITEM_ID_EXISTS, "item_id_exists.sql");
sql!(ITEM_ID_TENANT, "item_id_tenant.sql");
sql!(ITEM_EXISTS_KEY, "item_exists_key.sql");
sql!(ITEM_CLAIM, "item_claim.sql");
sql!(ITEM_CLAIM_CHECKED, "item_claim_checked.sql");
sql!(ITEM_CLAIM_ONE_TENANT, "item_claim_one_tenant.sql");
sql!(ITEM_COMPLETE, "item_complete.sql");
sql!(ITEM_COMPLETE_MANY, "item_complete_many.sql");
sql!(ITEM_COMPLETE_MANY_RESULTS, "item_complete_many_results.sql");
sql!(ITEM_PROGRESS, "item_progress.sql");
sql!(ITEM_FAIL, "item_fail.sql");
sql!(ITEM_DEFER, "item_defer.sql");
sql!(ITEM_RELEASE, "item_release.sql");
sql!(ITEM_EXTEND_LEASE, "item_extend_lease.sql");
sql!(ITEM_CANCEL_CLAIMED, "item_cancel_claimed.sql");
sql!(ITEM_FAIL_ORPHANED, "item_fail_orphaned.sql");
sql!(ITEM_STALE_TENANTS, "item_stale_tenants.sql");
sql!(ITEM_STALE_SELECT, "item_stale_select.sql");
sql!(ITEM_REQUEUE_STALE, "item_requeue_stale.sql");
sql!(ITEM_PURGE, "item_purge.sql");
sql!(ITEM_PURGE_PICK, "item_purge_pick.sql");
sql!(ITEM_PURGE_UNCOUNT, "item_purge_uncount.sql");
sql!(ITEM_PURGE_DUE, "item_purge_due.sql");
sql!(ITEM_PURGE_EDGES, "item_purge_edges.sql");
sql!(ITEM_PURGE_WAITS, "item_purge_waits.sql");
sql!(ITEM_PURGE_MEMBERS, "item_purge_members.sql");
sql!(BATCHES_PURGE, "batches_purge.sql");
sql!(BATCHES_PURGE_DUE, "batches_purge_due.sql");
sql!(ITEM_CANCEL, "item_cancel.sql");
sql!(ITEM_RETRY, "item_retry.sql");
sql!(ITEM_LIST, "item_list.sql");
sql!(ITEM_LIST_TENANT, "item_list_tenant.sql");
sql!(AUDIT_INSERT, "audit_insert.sql");
sql!(AUDIT_LIST, "audit_list.sql");
sql!(COUNTS, "counts.sql");
sql!(COUNTS_LANE, "counts_lane.sql");
sql!(COUNTS_TENANT, "counts_tenant.sql");
sql!(COUNTS_SETTLE, "counts_settle.sql");
sql!(COUNTS_SETTLE_MARK, "counts_settle_mark.sql");
sql!(COUNTS_UNFINAL, "counts_unfinal.sql");
sql!(COUNTS_UNSETTLED, "counts_unsettled.sql");
sql!(GAUGES_OLDEST, "gauges_oldest.sql");
sql!(GAUGES_FAILED, "gauges_failed.sql");
sql!(WORKER_BEAT, "worker_beat.sql");
sql!(WORKER_LIST, "worker_list.sql");
sql!(SWEEP_LEASE_FREE, "sweep_lease_free.sql");
sql!(SWEEP_LEASE_TAKE, "sweep_lease_take.sql");
sql!(SWEEP_LEASE_RENEW, "sweep_lease_renew.sql");
sql!(SWEEP_LEASE_RELEASE, "sweep_lease_release.sql");
sql!(SWEEP_LAST_PASS, "sweep_last_pass.sql");
sql!(WORKER_PURGE, "worker_purge.sql");
sql!(WORKER_PURGE_DUE, "worker_purge_due.sql");
sql!(ORCHESTRATION_INSERT, "orchestration_insert.sql");
sql!(
    ORCHESTRATION_REQUEST_CANCEL,
    "orchestration_request_cancel.sql"
);
sql!(
    ORCHESTRATION_PURGE_SIGNALS_OF,
    "orchestration_purge_signals_of.sql"
);
sql!(ORCHESTRATION_PURGE, "orchestration_purge.sql");
sql!(
    ORCHESTRATION_PURGE_CONSUMED,
    "orchestration_purge_consumed.sql"
);
sql!(ORCHESTRATION_GET, "orchestration_get.sql");
sql!(ORCHESTRATION_GET_ANY, "orchestration_get_any.sql");
sql!(ORCHESTRATION_GET_BY_KEY, "orchestration_get_by_key.sql");
sql!(ORCHESTRATION_LIST, "orchestration_list.sql");
sql!(ORCHESTRATION_UPDATE, "orchestration_update.sql");
sql!(ORCHESTRATION_DUE, "orchestration_due.sql");
sql!(ORCHESTRATION_PARKED_COUNT, "orchestration_parked_count.sql");
sql!(ORCHESTRATION_DEAD_STEPS, "orchestration_dead_steps.sql");
sql!(
    ORCHESTRATION_SIGNAL_INSERT,
    "orchestration_signal_insert.sql"
);
sql!(
    ORCHESTRATION_SIGNAL_PENDING,
    "orchestration_signal_pending.sql"
);
sql!(
    ORCHESTRATION_SIGNAL_CONSUME,
    "orchestration_signal_consume.sql"
);
sql!(ORCHESTRATION_SIGNAL_LIST, "orchestration_signal_list.sql");
sql!(MIGRATIONS_STATUS, "migrations_status.sql");
sql!(RECONCILE_CHECKPOINT_GET, "reconcile_checkpoint_get.sql");
sql!(RECONCILE_CHECKPOINT_LIST, "reconcile_checkpoint_list.sql");
sql!(
    RECONCILE_CHECKPOINT_INSERT,
    "reconcile_checkpoint_insert.sql"
);
sql!(
    RECONCILE_CHECKPOINT_ADVANCE,
    "reconcile_checkpoint_advance.sql"
);
sql!(RECONCILE_RECORD_READ, "reconcile_record_read.sql");
sql!(RECONCILE_RECORD_WRITE, "reconcile_record_write.sql");
sql!(RECONCILE_RECORD_GET, "reconcile_record_get.sql");
sql!(RECONCILE_RECORD_LIST, "reconcile_record_list.sql");
sql!(RECONCILE_PURGE_DELETED, "reconcile_purge_deleted.sql");
sql!(MINUTES_SETTLE, "minutes_settle.sql");
sql!(SETTLE_FINE_TABLE, "settle_fine_table.sql");
sql!(SETTLE_FINE, "settle_fine.sql");
sql!(SETTLE_FINE_CLEAR, "settle_fine_clear.sql");
sql!(MINUTES_EXPIRE, "minutes_expire.sql");
sql!(MINUTES_BY_MINUTE, "minutes_by_minute.sql");
sql!(MINUTES_BY_LANE_KIND, "minutes_by_lane_kind.sql");
sql!(ITEMS_RUNNING, "items_running.sql");
sql!(WAITS_RECORD, "waits_record.sql");
sql!(WAITS_PURGE, "waits_purge.sql");
sql!(WAITS_SINCE, "waits_since.sql");
