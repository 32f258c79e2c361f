//! Parking deep backlogs on PostgreSQL ([`crate::parking`] holds the rules).
//!
//! The sweep's pass ([`ParkStore::park_pass`]) and the give-back after
//! a claim run as the system role, each parking or giving back in its own
//! short transaction: the chosen items locked `SKIP LOCKED` (a claimer's
//! rows are left alone), then moved through the primary key. The groups
//! with parked items are read from `items_parked` itself (migration 0051),
//! so there is no list to drift from the items.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use crate::limits::LimitSetting;
use crate::parking::{GroupKey, ParkPass, ParkSteps, ParkStore, ParkedCache, PerGroup};
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
    /// After a claim: gives back one parked item per item of a parked
    /// group it took ([`crate::parking::give_back_after`]).
    pub(super) async fn give_back(&self, items: &[Item]) {
        crate::parking::give_back_after(self, items).await;
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
}

#[async_trait]
impl ParkSteps for PgStore {
    async fn limits_for_claim(&self) -> Result<Arc<Vec<LimitSetting>>> {
        self.limits_in_force().await
    }

    fn parked_cache(&self) -> &ParkedCache {
        &self.parked
    }

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

    async fn held_groups(&self, per: &PerGroup) -> Result<Vec<(GroupKey, i64)>> {
        let kinds: Vec<&str> = per.keys().map(String::as_str).collect();
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(PARK_HELD)
            .persistent(self.persistent)
            .bind(&kinds)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let key = (
                    r.try_get("tenant_id")?,
                    r.try_get("kind")?,
                    r.try_get("group_key")?,
                );
                Ok((key, r.try_get("held")?))
            })
            .collect()
    }

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

    async fn park(&self, key: &GroupKey, ordered: bool, keep: u32, n: u32) -> Result<u64> {
        let pick = if ordered { PARK_PICK_SEQ } else { PARK_PICK };
        self.move_picked(key, pick, Some(keep), n, PARK_MOVE).await
    }

    async fn unpark(&self, key: &GroupKey, ordered: bool, n: u32) -> Result<u64> {
        let pick = if ordered {
            UNPARK_PICK_SEQ
        } else {
            UNPARK_PICK
        };
        self.move_picked(key, pick, None, n, UNPARK_MOVE).await
    }
}

#[async_trait]
impl ParkStore for PgStore {
    async fn park_pass(&self) -> Result<ParkPass> {
        crate::parking::run_pass(self).await
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
