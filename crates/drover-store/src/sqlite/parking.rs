//! Parking deep backlogs on SQLite ([`crate::parking`] holds the rules).
//!
//! # What this module owns
//!
//! The sweep's pass ([`ParkStore::park_pass`]), the count of parked items,
//! and the give-back after a claim ([`SqliteStore::give_back`]), with their
//! statements (`sql/sqlite/park_*.sql`, `unpark_*.sql`, `parked_count.sql`)
//! and the indexes of migration 0051 (`items_group_next`, `items_parked`,
//! `items_parked_seq`).
//!
//! # Invariants
//!
//! - **One writer moves.** Each chunk parked or given back is one
//!   `BEGIN IMMEDIATE` transaction on the single writer: the pick and the
//!   move see the same rows and no claimer interleaves, so there is no
//!   lock to skip as on PostgreSQL. Chunks are separate transactions, so
//!   claims run between them.
//! - **The parked range is literal.** `available_at` is INTEGER
//!   microseconds; a parked item's lies in [2200-01-01, 9000-01-01) and
//!   every statement reading the parked indexes repeats those bounds as
//!   literals, which SQLite needs to use a partial index.
//! - **No list of parked groups.** They are read from `items_parked_seq`
//!   itself (a loose scan), so nothing can disagree with the items.
//! - **Orders.** A group's order is its claim order (priority,
//!   available_at, rowid), an ordered group's is its enqueue order (the
//!   rowid, migration 0034): parking and giving back follow it, so the
//!   parked items are always the group's last.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use super::row::to_micros;
use crate::limits::LimitSetting;
use crate::parking::{GroupKey, ParkPass, ParkSteps, ParkStore, ParkedCache, PerGroup};
use drover_core::error::{Error, Result};
use drover_core::item::Item;

const PARK_GROUPS: &str = include_str!("../../sql/sqlite/park_groups.sql");
const PARK_HELD: &str = include_str!("../../sql/sqlite/park_held.sql");
const PARK_FRONT: &str = include_str!("../../sql/sqlite/park_front.sql");
const PARK_FRONT_SEQ: &str = include_str!("../../sql/sqlite/park_front_seq.sql");
const PARK_PICK: &str = include_str!("../../sql/sqlite/park_pick.sql");
const PARK_PICK_SEQ: &str = include_str!("../../sql/sqlite/park_pick_seq.sql");
const PARK_MOVE: &str = include_str!("../../sql/sqlite/park_move.sql");
const UNPARK_PICK: &str = include_str!("../../sql/sqlite/unpark_pick.sql");
const UNPARK_PICK_SEQ: &str = include_str!("../../sql/sqlite/unpark_pick_seq.sql");
const UNPARK_MOVE: &str = include_str!("../../sql/sqlite/unpark_move.sql");
const PARKED_COUNT: &str = include_str!("../../sql/sqlite/parked_count.sql");

/// What a pick chooses in the group: parking passes over the group's
/// first `keep` due items; giving back takes the first parked ones.
#[derive(Clone, Copy)]
enum Pick {
    Park { keep: u32 },
    Unpark,
}

impl SqliteStore {
    /// After a claim: gives back one parked item per item of a parked
    /// group it took ([`crate::parking::give_back_after`]).
    pub(super) async fn give_back(&self, items: &[Item]) {
        crate::parking::give_back_after(self, items).await;
    }

    /// One write transaction: the rowids `pick` chooses, moved by `write`.
    async fn move_picked(
        &self,
        key: &GroupKey,
        pick: &str,
        how: Pick,
        n: u32,
        write: &str,
    ) -> Result<u64> {
        let mut tx = self.begin().await?;
        // "Now" once the write lock is held, as a claim reads it: read
        // before, it would be a lock wait old.
        let now = to_micros(self.now());
        let q = sqlx::query_scalar::<_, i64>(pick)
            .bind(key.0)
            .bind(&key.1)
            .bind(&key.2);
        // Each statement numbers only the parameters it reads.
        let q = match how {
            Pick::Park { keep } => q.bind(i64::from(keep)).bind(i64::from(n)).bind(now),
            Pick::Unpark => q.bind(i64::from(n)),
        };
        let ids: Vec<i64> = q.fetch_all(&mut *tx).await?;
        if ids.is_empty() {
            tx.rollback().await?;
            return Ok(0);
        }
        let ids = serde_json::to_string(&ids).map_err(|e| Error::invalid("ids", e.to_string()))?;
        let moved = sqlx::query(write)
            .bind(ids)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(moved)
    }
}

#[async_trait]
impl ParkSteps for SqliteStore {
    async fn limits_for_claim(&self) -> Result<Arc<Vec<LimitSetting>>> {
        self.limits_cached().await
    }

    fn parked_cache(&self) -> &ParkedCache {
        self.parked.as_ref()
    }

    async fn parked_groups_now(&self) -> Result<Vec<GroupKey>> {
        let rows = sqlx::query(PARK_GROUPS).fetch_all(&self.reader).await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("tenant_id")?,
                    r.try_get("kind")?,
                    r.try_get("group_key")?,
                ))
            })
            .collect()
    }

    async fn held_groups(&self, per: &PerGroup) -> Result<Vec<(GroupKey, i64)>> {
        let kinds: Vec<&str> = per.keys().map(String::as_str).collect();
        let kinds =
            serde_json::to_string(&kinds).map_err(|e| Error::invalid("kinds", e.to_string()))?;
        let rows = sqlx::query(PARK_HELD)
            .bind(kinds)
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    (
                        r.try_get("tenant_id")?,
                        r.try_get("kind")?,
                        r.try_get("group_key")?,
                    ),
                    r.try_get("held")?,
                ))
            })
            .collect()
    }

    async fn front_due(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u32> {
        let sql = if ordered { PARK_FRONT_SEQ } else { PARK_FRONT };
        let due: Vec<bool> = sqlx::query_scalar(sql)
            .bind(key.0)
            .bind(&key.1)
            .bind(&key.2)
            .bind(i64::from(n))
            .bind(to_micros(self.now()))
            .fetch_all(&self.reader)
            .await?;
        Ok(u32::try_from(due.iter().filter(|d| **d).count()).unwrap_or(u32::MAX))
    }

    async fn park(&self, key: &GroupKey, ordered: bool, keep: u32, n: u32) -> Result<u64> {
        let pick = if ordered { PARK_PICK_SEQ } else { PARK_PICK };
        self.move_picked(key, pick, Pick::Park { keep }, n, PARK_MOVE)
            .await
    }

    async fn unpark(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u64> {
        let pick = if ordered {
            UNPARK_PICK_SEQ
        } else {
            UNPARK_PICK
        };
        self.move_picked(key, pick, Pick::Unpark, n, UNPARK_MOVE)
            .await
    }
}

#[async_trait]
impl ParkStore for SqliteStore {
    async fn park_pass(&self) -> Result<ParkPass> {
        crate::parking::run_pass(self).await
    }

    async fn parked_count(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(PARKED_COUNT)
            .fetch_one(&self.reader)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::HashSet;
    use std::time::Duration;

    use chrono::{TimeDelta, Utc};
    use uuid::Uuid;

    use super::*;
    use crate::limits::{LimitScope, LimitSource, LimitSpec, LimitStore};
    use crate::parking::window;
    use crate::sqlite::SqliteOptions;
    use crate::{ClaimParams, ClaimRef, Completion, ItemStore, Store};
    use drover_core::item::NewItem;

    const LANE: &str = "parking";
    const KIND: &str = "k";
    const BIG: usize = 3000;
    const SMALL: [&str; 5] = ["g0", "g1", "g2", "g3", "g4"];
    const EACH: usize = 10;

    /// A migrated store on a fresh file, and the file's path.
    async fn store() -> (SqliteStore, String) {
        let path = std::env::temp_dir().join(format!("drover-parking-{}.db", Uuid::new_v4()));
        let path = path.to_string_lossy().into_owned();
        let s = SqliteStore::open(&path, SqliteOptions::default())
            .await
            .unwrap();
        s.migrate().await.unwrap();
        (s, path)
    }

    async fn close(s: SqliteStore, path: &str) {
        s.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }

    fn params(limit: u32) -> ClaimParams {
        ClaimParams {
            lane: LANE.into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: Duration::from_secs(600),
            limit,
        }
    }

    /// A per-group limit of 1 on the kind; the big group's items (payload:
    /// their enqueue index), due an hour ago, and then the small groups',
    /// due now. `reversed`: the big group's claim order is the reverse of
    /// its enqueue order (each enqueued a microsecond earlier than the
    /// one before), so a pass that parked an ordered group in claim order
    /// would park its head.
    async fn fill(s: &SqliteStore, ordered: bool, reversed: bool) {
        let spec = LimitSpec {
            ordered,
            ..LimitSpec::concurrency(1)
        };
        s.limit_set(
            &LimitScope::KindPerGroup(KIND.into()),
            LimitSource::Operator,
            spec,
            Uuid::nil(),
        )
        .await
        .unwrap();
        let past = Utc::now() - TimeDelta::hours(1);
        let big: Vec<NewItem> = (0..BIG)
            .map(|i| {
                let step = TimeDelta::microseconds(i64::try_from(i).unwrap());
                let at = if reversed { past - step } else { past };
                NewItem::new(KIND, serde_json::json!({ "i": i }))
                    .with_lane(LANE)
                    .with_group("big")
                    .with_available_at(at)
            })
            .collect();
        for chunk in big.chunks(500) {
            s.item_insert_many(chunk).await.unwrap();
        }
        let small: Vec<NewItem> = SMALL
            .iter()
            .flat_map(|g| {
                (0..EACH).map(move |i| {
                    NewItem::new(KIND, serde_json::json!({ "i": i }))
                        .with_lane(LANE)
                        .with_group(*g)
                })
            })
            .collect();
        s.item_insert_many(&small).await.unwrap();
    }

    async fn count(s: &SqliteStore, status: &str) -> usize {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM items WHERE status = ?1")
            .bind(status)
            .fetch_one(s.writer())
            .await
            .unwrap();
        usize::try_from(n).unwrap()
    }

    /// Claims the big group's first item and holds it, then parks: all of
    /// the group's due items but its window are parked. Returns the held
    /// item.
    async fn hold_and_park(s: &SqliteStore) -> Item {
        let held = s.item_claim(&params(1)).await.unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].group.as_deref(), Some("big"));
        let pass = s.park_pass().await.unwrap();
        let expected = BIG - 1 - window(1) as usize;
        assert_eq!(
            pass,
            ParkPass {
                parked: expected as u64,
                unparked: 0,
                groups: 1
            }
        );
        assert_eq!(s.parked_count().await.unwrap(), expected as u64);
        // A second pass finds nothing more to do: the window is full and
        // the group is no longer deep.
        let again = s.park_pass().await.unwrap();
        assert_eq!(again.moved(), 0, "{again:?}");
        assert_eq!(s.parked_count().await.unwrap(), expected as u64);
        held.into_iter().next().unwrap()
    }

    #[tokio::test]
    async fn a_deep_full_group_is_parked_and_given_back_as_it_drains() {
        let (s, path) = store().await;
        fill(&s, false, false).await;
        let held = hold_and_park(&s).await;

        // Readers show a parked item's original due time.
        let parked_id: Uuid = sqlx::query_scalar(
            "SELECT id FROM items WHERE available_at >= 7258118400000000 ORDER BY rowid DESC LIMIT 1",
        )
        .fetch_one(s.writer())
        .await
        .unwrap();
        let shown = s.item_get(Uuid::nil(), parked_id).await.unwrap().unwrap();
        assert!(shown.available_at < Utc::now(), "{}", shown.available_at);

        // The other groups are claimable past the full one.
        let others = s.item_claim(&params(10)).await.unwrap();
        let groups: HashSet<&str> = others.iter().filter_map(|i| i.group.as_deref()).collect();
        assert_eq!(others.len(), SMALL.len(), "{groups:?}");
        assert_eq!(groups, SMALL.iter().copied().collect());

        // Drain through the handover (its claim gives back too), with a
        // pass whenever nothing is claimable.
        let mut done: HashSet<Uuid> = HashSet::new();
        assert_eq!(
            s.parked_count().await.unwrap(),
            (BIG - 1 - window(1) as usize) as u64,
            "they give nothing back"
        );
        let mut pending: Vec<Item> = others;
        pending.push(held);
        let mut first = true;
        loop {
            let completions: Vec<Completion> = pending
                .iter()
                .map(|i| Completion {
                    claim: ClaimRef::of(i).unwrap(),
                    result: None,
                })
                .collect();
            for i in &pending {
                assert!(done.insert(i.id), "item {} ran twice", i.id);
            }
            let handover = s
                .item_complete_then_claim(&completions, &params(16))
                .await
                .unwrap();
            assert_eq!(handover.landed.len(), completions.len());
            pending = handover.claimed.unwrap();
            if first {
                // The handover took the big group's next item (its window's
                // first) and gave one parked item back for it.
                first = false;
                assert!(pending.iter().any(|i| i.group.as_deref() == Some("big")));
                assert_eq!(
                    s.parked_count().await.unwrap(),
                    (BIG - 2 - window(1) as usize) as u64
                );
            }
            if pending.is_empty() {
                s.park_pass().await.unwrap();
                pending = s.item_claim(&params(16)).await.unwrap();
                if pending.is_empty() {
                    break;
                }
            }
        }
        assert_eq!(done.len(), BIG + SMALL.len() * EACH);
        assert_eq!(count(&s, "done").await, done.len());
        assert_eq!(count(&s, "pending").await, 0);
        assert_eq!(s.parked_count().await.unwrap(), 0);
        assert_eq!(s.park_pass().await.unwrap(), ParkPass::default());
        close(s, &path).await;
    }

    #[tokio::test]
    async fn an_ordered_group_is_parked_in_enqueue_order_and_runs_in_it() {
        let (s, path) = store().await;
        fill(&s, true, true).await;
        let held = hold_and_park(&s).await;
        assert_eq!(held.payload["i"], 0, "the head first");
        // The parked items are the group's last by enqueue order.
        let first_parked: i64 = sqlx::query_scalar(
            "SELECT min(json_extract(payload, '$.i')) FROM items
             WHERE group_key = 'big' AND available_at >= 7258118400000000",
        )
        .fetch_one(s.writer())
        .await
        .unwrap();
        assert_eq!(first_parked, 1 + i64::from(window(1)));

        let mut order: Vec<i64> = Vec::new();
        let mut done: HashSet<Uuid> = HashSet::new();
        let mut pending = vec![held];
        loop {
            for i in &pending {
                assert!(done.insert(i.id), "item {} ran twice", i.id);
                if i.group.as_deref() == Some("big") {
                    order.push(i.payload["i"].as_i64().unwrap());
                }
                s.item_complete(&ClaimRef::of(i).unwrap()).await.unwrap();
            }
            pending = s.item_claim(&params(16)).await.unwrap();
            if pending.is_empty() {
                s.park_pass().await.unwrap();
                pending = s.item_claim(&params(16)).await.unwrap();
                if pending.is_empty() {
                    break;
                }
            }
        }
        let expected: Vec<i64> = (0..i64::try_from(BIG).unwrap()).collect();
        assert_eq!(order, expected, "the big group ran in enqueue order");
        assert_eq!(done.len(), BIG + SMALL.len() * EACH);
        assert_eq!(count(&s, "done").await, done.len());
        assert_eq!(s.parked_count().await.unwrap(), 0);
        close(s, &path).await;
    }

    #[tokio::test]
    async fn a_cleared_limit_gives_every_parked_item_back() {
        let (s, path) = store().await;
        fill(&s, false, false).await;
        hold_and_park(&s).await;
        s.limit_clear(
            &LimitScope::KindPerGroup(KIND.into()),
            LimitSource::Operator,
        )
        .await
        .unwrap();
        let pass = s.park_pass().await.unwrap();
        assert_eq!(pass.unparked, (BIG - 1 - window(1) as usize) as u64);
        assert_eq!(pass.groups, 0);
        assert_eq!(s.parked_count().await.unwrap(), 0);
        close(s, &path).await;
    }
}
