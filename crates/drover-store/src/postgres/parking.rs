//! Parking deep backlogs on PostgreSQL ([`crate::parking`] holds the rules).
//!
//! The sweep's pass ([`ParkStore::park_pass`]) and the give-back after
//! a claim run as the system role, each parking or giving back in its own
//! short transaction: the chosen items locked `SKIP LOCKED` (a claimer's
//! rows are left alone), then moved through the primary key. The groups
//! with parked items are read from `items_parked` itself (migration 0051),
//! so there is no list to drift from the items.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use crate::parking::{
    GroupKey, PARK_CHUNK, PARK_PASS_BUDGET, ParkPass, ParkStore, deep, give_back, per_group, window,
};
use drover_core::error::Result;
use drover_core::item::Item;

const PARK_GROUPS: &str = include_str!("../../sql/postgres/park_groups.sql");
const PARK_HELD: &str = include_str!("../../sql/postgres/park_held.sql");
const PARK_FRONT: &str = include_str!("../../sql/postgres/park_front.sql");
const PARK_FRONT_SEQ: &str = include_str!("../../sql/postgres/park_front_seq.sql");
const PARK_PICK: &str = include_str!("../../sql/postgres/park_pick.sql");
const PARK_PICK_SEQ: &str = include_str!("../../sql/postgres/park_pick_seq.sql");
const PARK_MOVE: &str = include_str!("../../sql/postgres/park_move.sql");
const UNPARK_PICK: &str = include_str!("../../sql/postgres/unpark_pick.sql");
const UNPARK_PICK_SEQ: &str = include_str!("../../sql/postgres/unpark_pick_seq.sql");
const UNPARK_MOVE: &str = include_str!("../../sql/postgres/unpark_move.sql");
const PARKED_COUNT: &str = include_str!("../../sql/postgres/parked_count.sql");

impl PgStore {
    /// The groups with parked items, read now.
    async fn parked_groups_now(&self) -> Result<Vec<GroupKey>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(PARK_GROUPS)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
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

    /// The groups with parked items, from the cache while it is fresh.
    async fn parked_groups(&self) -> Result<Arc<Vec<GroupKey>>> {
        if let Some(v) = self.parked.fresh() {
            return Ok(v);
        }
        let groups = self.parked_groups_now().await?;
        Ok(self.parked.put(groups))
    }

    /// After a claim: for each item of a parked group it took, gives back
    /// one parked item of that group, so the group's window stays full.
    /// Never fails the claim: what a failure leaves undone the sweep's next
    /// pass tops up.
    pub(super) async fn give_back(&self, items: &[Item]) {
        if items.is_empty() {
            return;
        }
        if let Err(e) = self.give_back_for(items).await {
            tracing::warn!(target: "drover::postgres", error = %e,
                "giving back parked items after a claim failed; the sweep tops the window up");
        }
    }

    async fn give_back_for(&self, items: &[Item]) -> Result<()> {
        if !items.iter().any(|i| i.group.is_some()) {
            return Ok(());
        }
        let per = per_group(&self.limits_in_force().await?);
        if per.is_empty() {
            return Ok(());
        }
        let parked = self.parked_groups().await?;
        if parked.is_empty() {
            return Ok(());
        }
        let back = give_back(
            &parked,
            items
                .iter()
                .map(|i| (i.tenant_id, i.kind.as_str(), i.group.as_deref())),
        );
        for (key, n) in back {
            let ordered = per.get(&key.1).is_some_and(|(_, o)| *o);
            self.unpark(&key, ordered, n).await?;
        }
        Ok(())
    }

    /// Gives back up to `n` parked items of `key`, first in its order.
    async fn unpark(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u64> {
        let pick = if ordered {
            UNPARK_PICK_SEQ
        } else {
            UNPARK_PICK
        };
        self.move_picked(key, pick, None, n, UNPARK_MOVE).await
    }

    /// Parks up to `n` due pending items of `key` beyond its first
    /// `keep`, in its order.
    async fn park(&self, key: &GroupKey, ordered: bool, keep: u32, n: u32) -> Result<u64> {
        let pick = if ordered { PARK_PICK_SEQ } else { PARK_PICK };
        self.move_picked(key, pick, Some(keep), n, PARK_MOVE).await
    }

    /// One transaction: the ids `pick` chooses (locked, skipping locked
    /// rows), moved by `write`.
    async fn move_picked(
        &self,
        key: &GroupKey,
        pick: &str,
        keep: Option<u32>,
        n: u32,
        write: &str,
    ) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let mut q = sqlx::query_scalar::<_, Uuid>(pick)
            .persistent(false)
            .bind(key.0)
            .bind(&key.1)
            .bind(&key.2);
        if let Some(k) = keep {
            q = q.bind(i64::from(k));
        }
        let ids: Vec<Uuid> = q.bind(i64::from(n)).fetch_all(&mut *tx).await?;
        let moved = if ids.is_empty() {
            0
        } else {
            sqlx::query(write)
                .persistent(false)
                .bind(&ids)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        };
        tx.commit().await?;
        Ok(moved)
    }

    /// How many of the first `n` items of `key` in its order are due.
    async fn front_due(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u32> {
        let sql = if ordered { PARK_FRONT_SEQ } else { PARK_FRONT };
        let mut tx = self.begin_system().await?;
        let due: Vec<bool> = sqlx::query_scalar(sql)
            .persistent(self.persistent)
            .bind(key.0)
            .bind(&key.1)
            .bind(&key.2)
            .bind(i64::from(n))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(u32::try_from(due.iter().filter(|d| **d).count()).unwrap_or(u32::MAX))
    }
}

#[async_trait]
impl ParkStore for PgStore {
    async fn park_pass(&self) -> Result<ParkPass> {
        let started = Instant::now();
        let over = || started.elapsed() >= PARK_PASS_BUDGET;
        let per = per_group(&self.limits_in_force().await?);
        let mut pass = ParkPass::default();
        // Parked groups first: give back what no limit holds any more, top
        // up the windows of the others.
        for key in self.parked_groups_now().await? {
            if over() {
                break;
            }
            match per.get(&key.1) {
                None => loop {
                    let n = self.unpark(&key, false, PARK_CHUNK).await?;
                    pass.unparked += n;
                    if n < u64::from(PARK_CHUNK) || over() {
                        break;
                    }
                },
                Some(&(limit, ordered)) => {
                    let w = window(limit);
                    let due = self.front_due(&key, ordered, w).await?;
                    if due < w {
                        pass.unparked += self.unpark(&key, ordered, w - due).await?;
                    } else if self.front_due(&key, false, 2 * w + 1).await? > 2 * w {
                        // Items that arrived after the group was parked wait
                        // unparked beyond its window (for an ordered group,
                        // each one a candidate every claim reads past): park
                        // them too, keeping the parked ones the group's last.
                        loop {
                            let moved = self.park(&key, ordered, w, PARK_CHUNK).await?;
                            pass.parked += moved;
                            if moved < u64::from(PARK_CHUNK) || over() {
                                break;
                            }
                        }
                    }
                }
            }
        }
        // Then the full groups that are deep: park beyond their window.
        if !per.is_empty() && !over() {
            let kinds: Vec<&str> = per.keys().map(String::as_str).collect();
            let mut tx = self.begin_system().await?;
            let held = sqlx::query(PARK_HELD)
                .persistent(self.persistent)
                .bind(&kinds)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            for r in &held {
                if over() {
                    break;
                }
                let key: GroupKey = (
                    r.try_get("tenant_id")?,
                    r.try_get("kind")?,
                    r.try_get("group_key")?,
                );
                let n: i64 = r.try_get("held")?;
                let Some(&(limit, ordered)) = per.get(&key.1) else {
                    continue;
                };
                if n < i64::from(limit) {
                    continue;
                }
                // Deep by its due items that are not parked, in claim order
                // whatever the group's order: an ordered group's parked
                // items come before its later arrivals by seq, and counting
                // them left those arrivals unparked.
                let d = deep(limit);
                if self.front_due(&key, false, d + 1).await? <= d {
                    continue;
                }
                loop {
                    let moved = self.park(&key, ordered, window(limit), PARK_CHUNK).await?;
                    pass.parked += moved;
                    if moved < u64::from(PARK_CHUNK) || over() {
                        break;
                    }
                }
            }
        }
        let groups = self.parked_groups_now().await?;
        pass.groups = groups.len() as u64;
        self.parked.put(groups);
        if pass.moved() > 0 {
            tracing::debug!(target: "drover::postgres", parked = pass.parked,
                unparked = pass.unparked, groups = pass.groups, "parking pass");
        }
        Ok(pass)
    }

    async fn parked_count(&self) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let n: i64 = sqlx::query_scalar(PARKED_COUNT)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
