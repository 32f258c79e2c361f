//! Concurrency limits on SQLite: the settings (migration 0033) and the
//! limited claim. The claim runs in `BEGIN IMMEDIATE` on the single writer,
//! so reading the limits, counting the claims that hold slots and claiming
//! are one step no other claimer interleaves with: the limit is exact.
//! Candidates are read a page at a time in claim order until the claim is
//! full or the lane's available items are all seen, so items a full scope
//! holds back never starve the ones behind them.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, after, from_micros, to_micros};
use crate::ClaimParams;
use crate::limits::{
    Admission, LimitScope, LimitSetting, LimitSource, LimitSpec, LimitStore, LimitUsage,
    OnDeadLetter, OrderBlocker, UsageRow, applies, effective, full_scopes, keys_of, ordered_kinds,
    room, usage,
};
use crate::rates::{Cells, HeldBack, Rate, RateSetting, rate_keys_of};
use drover_core::error::{Error, Result};
use drover_core::item::Item;

const LIMIT_SET: &str = include_str!("../../sql/sqlite/limit_set.sql");
const LIMIT_CLEAR: &str = include_str!("../../sql/sqlite/limit_clear.sql");
const LIMIT_LIST: &str = include_str!("../../sql/sqlite/limit_list.sql");
const LIMIT_LIST_0033: &str = include_str!("../../sql/sqlite/limit_list_0033.sql");
const LIMIT_ORDER_BLOCKER: &str = include_str!("../../sql/sqlite/limit_order_blocker.sql");
const LIMIT_HELD: &str = include_str!("../../sql/sqlite/limit_held.sql");
pub(super) const LIMIT_CANDIDATES: &str = include_str!("../../sql/sqlite/limit_candidates.sql");
/// The candidates with the head probe of ordered groups at their mark.
static LIMIT_CANDIDATES_ORDERED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    LIMIT_CANDIDATES.replace(
        "/*{ordered}*/",
        include_str!("../../sql/sqlite/limit_candidates_head.sql"),
    )
});
pub(super) const LIMIT_CLAIM: &str = include_str!("../../sql/sqlite/limit_claim.sql");
const LIMIT_USAGE: &str = include_str!("../../sql/sqlite/limit_usage.sql");

/// Candidates read per page after the first.
const PAGE: i64 = 256;
/// The first page: this many candidates per slot the claim asks for, plus
/// a few.
pub(super) const FIRST_PAGE_PER_SLOT: i64 = 2;
pub(super) const FIRST_PAGE_EXTRA: i64 = 16;

fn setting(r: &SqliteRow) -> Result<LimitSetting> {
    let scope: String = r.try_get("scope")?;
    let name: String = r.try_get("name")?;
    let source: String = r.try_get("source")?;
    let concurrency: i64 = r.try_get("concurrency")?;
    Ok(LimitSetting {
        scope: LimitScope::from_parts(&scope, &name)?,
        source: LimitSource::from_name(&source)?,
        concurrency: u32::try_from(concurrency).unwrap_or(0),
        ordered: r.try_get::<i64, _>("ordered")? != 0,
        on_dead_letter: OnDeadLetter::from_name(&r.try_get::<String, _>("on_dead_letter")?)?,
        set_at: from_micros(r.try_get("set_at")?)?,
        set_by: r.try_get("set_by")?,
    })
}

/// The scope keys a row (lane, kind, tenant_id, group_key) counts against.
pub(super) fn row_keys(limits: &[LimitSetting], r: &SqliteRow) -> Result<Vec<(String, u32)>> {
    let lane: String = r.try_get("lane")?;
    let kind: String = r.try_get("kind")?;
    let tenant: Uuid = r.try_get("tenant_id")?;
    let group: Option<String> = r.try_get("group_key")?;
    Ok(keys_of(limits, &lane, &kind, tenant, group.as_deref()))
}

/// The rate cells a row (lane, kind, tenant_id, group_key) starts against.
pub(super) fn row_rate_keys(rates: &[RateSetting], r: &SqliteRow) -> Result<Vec<(String, Rate)>> {
    if rates.is_empty() {
        return Ok(Vec::new());
    }
    let lane: String = r.try_get("lane")?;
    let kind: String = r.try_get("kind")?;
    let tenant: Uuid = r.try_get("tenant_id")?;
    let group: Option<String> = r.try_get("group_key")?;
    Ok(rate_keys_of(rates, &lane, &kind, tenant, group.as_deref()))
}

impl SqliteStore {
    /// The limits in force, from the cache while it is fresh (a change
    /// reaches every claimer within [`LIMITS_CACHE_TTL`](crate::limits::LIMITS_CACHE_TTL)).
    pub(super) async fn limits_cached(&self) -> Result<std::sync::Arc<Vec<LimitSetting>>> {
        if let Some(v) = self.limits.fresh() {
            return Ok(v);
        }
        let settings = self.limit_settings().await?;
        Ok(self.limits.put(effective(&settings)))
    }
}

/// One row of `limit_usage.sql`.
fn usage_row(r: &SqliteRow) -> Result<UsageRow> {
    Ok(UsageRow {
        claimed: r.try_get::<String, _>("status")? == "claimed",
        lane: r.try_get("lane")?,
        kind: r.try_get("kind")?,
        tenant: r.try_get("tenant_id")?,
        group: r.try_get("group_key")?,
        n: u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0),
    })
}

/// Every stored setting, read on `conn`; none on a schema before limits,
/// and none ordered on one before migration 0034 (a binary ahead of its
/// database until `drover migrate`: claims run as that schema allows).
async fn settings_on<'c, E>(conn: E) -> Result<Vec<LimitSetting>>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite> + Copy,
{
    let rows = match sqlx::query(LIMIT_LIST).fetch_all(conn).await {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => {
            return Ok(Vec::new());
        }
        Err(sqlx::Error::Database(e)) if e.message().contains("no such column") => {
            sqlx::query(LIMIT_LIST_0033).fetch_all(conn).await?
        }
        Err(e) => return Err(e.into()),
    };
    rows.iter().map(setting).collect()
}

/// The ordered kinds of `limits` as the candidates statement binds them:
/// all of them, and those that hold on a dead letter (JSON arrays; `None`
/// when empty).
pub(super) fn ordered_binds(limits: &[LimitSetting]) -> Result<(Option<String>, Option<String>)> {
    let ordered = ordered_kinds(limits);
    if ordered.is_empty() {
        return Ok((None, None));
    }
    let all: Vec<&str> = ordered.iter().map(|(k, _)| k.as_str()).collect();
    let hold: Vec<&str> = ordered
        .iter()
        .filter(|(_, r)| *r == OnDeadLetter::Hold)
        .map(|(k, _)| k.as_str())
        .collect();
    let json =
        |v: &[&str]| serde_json::to_string(v).map_err(|e| Error::invalid("kinds", e.to_string()));
    Ok((
        Some(json(&all)?),
        if hold.is_empty() {
            None
        } else {
            Some(json(&hold)?)
        },
    ))
}

/// The scopes full as a claim begins, as the candidates statement leaves
/// them out: the claim's lane, the kinds (JSON array), the groups (JSON
/// array of kind, NUL, hex tenant, NUL, group).
pub(super) struct Full {
    pub(super) lane: bool,
    pub(super) kinds: Option<String>,
    pub(super) groups: Option<String>,
}

impl Full {
    /// From the claimed rows `claimed` under `limits`, for a claim of
    /// `lane`, with the scopes the rates hold back (`rated`).
    pub(super) fn of(
        limits: &[LimitSetting],
        lane: &str,
        claimed: &[SqliteRow],
        rated: HeldBack,
    ) -> Result<Full> {
        let parts = claimed
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("lane")?,
                    r.try_get::<String, _>("kind")?,
                    r.try_get::<Uuid, _>("tenant_id")?,
                    r.try_get::<Option<String>, _>("group_key")?,
                    usize::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut f = full_scopes(
            limits,
            parts.iter().flat_map(|(l, k, t, g, n)| {
                std::iter::repeat_n((l.as_str(), k.as_str(), *t, g.as_deref()), *n)
            }),
        );
        if rated.lane {
            f.lanes.push(lane.to_owned());
        }
        f.kinds.extend(rated.kinds);
        f.groups.extend(rated.groups);
        let json = |v: &[String]| {
            serde_json::to_string(v).map_err(|e| Error::invalid("kinds", e.to_string()))
        };
        let groups: Vec<String> = f
            .groups
            .iter()
            .map(|(kind, tenant, g)| {
                let hex: String = tenant
                    .as_bytes()
                    .iter()
                    .map(|b| format!("{b:02X}"))
                    .collect();
                format!("{kind}\u{0}{hex}\u{0}{g}")
            })
            .collect();
        Ok(Full {
            lane: f.lanes.iter().any(|l| l == lane),
            kinds: if f.kinds.is_empty() {
                None
            } else {
                Some(json(&f.kinds)?)
            },
            groups: if groups.is_empty() {
                None
            } else {
                Some(json(&groups)?)
            },
        })
    }
}

/// Slots held per scope key, from the claimed rows (one per distinct scope
/// parts, with how many hold them).
fn held_of(limits: &[LimitSetting], claimed: &[SqliteRow]) -> Result<HashMap<String, u64>> {
    let mut held: HashMap<String, u64> = HashMap::new();
    for r in claimed {
        let n = u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0);
        for (k, _) in row_keys(limits, r)? {
            *held.entry(k).or_default() += n;
        }
    }
    Ok(held)
}

/// What a limited claim of `p` starts from on the open write transaction
/// at `now`: the slots held per scope key, the rate cells read at `now`,
/// and the scopes full as it begins (the claimed rows' and the ones the
/// rates hold back: left out of the candidates); `None` when the lane
/// itself is full (nothing to claim).
pub(super) async fn opening(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    limits: &[LimitSetting],
    rates: &[RateSetting],
    now: DateTime<Utc>,
) -> Result<Option<(HashMap<String, u64>, Cells, Full)>> {
    let claimed = if limits.is_empty() {
        Vec::new()
    } else {
        sqlx::query(LIMIT_HELD).fetch_all(&mut *conn).await?
    };
    let (cells, held_back) = if crate::rates::applies(rates, &p.lane, &p.kinds) {
        super::rates::cells_now(&mut *conn, rates, &p.lane, now).await?
    } else {
        (Cells::new(now, []), HeldBack::default())
    };
    held_back.note_rate_limited(&p.kinds);
    let full = Full::of(limits, &p.lane, &claimed, held_back)?;
    if full.lane {
        return Ok(None);
    }
    Ok(Some((held_of(limits, &claimed)?, cells, full)))
}

/// The limited claim of `p` on the open write transaction at `now`, or
/// `None` when every limit it may count against has room for the whole
/// claim and nothing is full: the caller then runs the unlimited claim on
/// the same transaction (a limit that does not bind costs the read of the
/// held slots and nothing more).
pub(super) async fn claim_on(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
    limits: &[LimitSetting],
    rates: &[RateSetting],
    now: DateTime<Utc>,
) -> Result<Option<Vec<Item>>> {
    let rated = crate::rates::applies(rates, &p.lane, &p.kinds);
    let Some((held, mut cells, full)) = opening(conn, p, limits, rates, now).await? else {
        return Ok(Some(Vec::new()));
    };
    if !rated
        && full.kinds.is_none()
        && room(limits, &p.lane, &p.kinds, &held).is_some_and(|r| r >= u64::from(p.limit))
    {
        return Ok(None);
    }
    let kinds = if p.kinds.is_empty() {
        None
    } else {
        Some(serde_json::to_string(&p.kinds).map_err(|e| Error::invalid("kinds", e.to_string()))?)
    };
    let mut admission = Admission::new(held);
    let (ordered, hold) = ordered_binds(limits)?;
    let mut admitted: Vec<Uuid> = Vec::new();
    // The claim order position the last page ended at.
    let mut last = (i64::MIN, i64::MIN, i64::MIN);
    // The first page sized to the claim (room for a few held back), the
    // later ones larger: a limit that does not bind reads about what it
    // claims, and a binding one pages through what it holds back.
    let mut page_size = i64::from(p.limit)
        .saturating_mul(FIRST_PAGE_PER_SLOT)
        .saturating_add(FIRST_PAGE_EXTRA)
        .min(PAGE);
    while admitted.len() < p.limit as usize {
        // Without an ordered limit in force, the statement without the
        // head probe (it runs on a schema before migration 0034 too).
        let mut q = sqlx::query(if ordered.is_some() {
            LIMIT_CANDIDATES_ORDERED.as_str()
        } else {
            LIMIT_CANDIDATES
        })
        .bind(&p.lane)
        .bind(to_micros(now))
        .bind(kinds.as_deref())
        .bind(page_size)
        .bind(last.0)
        .bind(last.1)
        .bind(last.2)
        .bind(full.kinds.as_deref())
        .bind(full.groups.as_deref());
        if ordered.is_some() {
            q = q.bind(ordered.as_deref()).bind(hold.as_deref());
        }
        let page = q.fetch_all(&mut *conn).await?;
        for r in &page {
            if admitted.len() == p.limit as usize {
                break;
            }
            let rate_keys = row_rate_keys(rates, r)?;
            // Rates first: a start the rate holds back takes no slot.
            if !cells.would_admit(&rate_keys) {
                continue;
            }
            if admission.admit(&row_keys(limits, r)?) {
                cells.admit(&rate_keys);
                admitted.push(r.try_get("id")?);
            }
        }
        match page.last() {
            Some(r) if (page.len() as i64) == page_size => {
                last = (
                    r.try_get("priority")?,
                    r.try_get("available_at")?,
                    r.try_get("rid")?,
                );
                page_size = PAGE;
            }
            _ => break,
        }
    }
    cells.note_rate_limited();
    if admitted.is_empty() {
        return Ok(Some(Vec::new()));
    }
    // The moved cells with the claim, on the writer's transaction.
    super::rates::write_cells(conn, cells.changed()).await?;
    let lease = to_micros(after(now, p.lease));
    let ids: Vec<String> = admitted.iter().map(|id| id.simple().to_string()).collect();
    let ids = serde_json::to_string(&ids).map_err(|e| Error::invalid("ids", e.to_string()))?;
    let rows = sqlx::query(LIMIT_CLAIM)
        .bind(&p.worker_id)
        .bind(lease)
        .bind(to_micros(now))
        // The system signs the claim, as every write after the enqueue.
        .bind(Uuid::nil())
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?;
    let mut items = rows.iter().map(row::item).collect::<Result<Vec<_>>>()?;
    items.sort_by(|a, b| {
        (a.priority, a.available_at, a.id).cmp(&(b.priority, b.available_at, b.id))
    });
    Ok(Some(items))
}

#[async_trait]
impl LimitStore for SqliteStore {
    async fn limit_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        spec: LimitSpec,
        actor: Uuid,
    ) -> Result<LimitSetting> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(LIMIT_SET)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .bind(i64::from(spec.concurrency))
            .bind(to_micros(self.now()))
            .bind(actor)
            .bind(i64::from(spec.ordered))
            .bind(spec.on_dead_letter.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        self.limits.clear();
        setting(&r)
    }

    async fn limit_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(LIMIT_CLEAR)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        self.limits.clear();
        Ok(n > 0)
    }

    async fn limit_settings(&self) -> Result<Vec<LimitSetting>> {
        settings_on(&self.reader).await
    }

    async fn limit_usage(&self) -> Result<Vec<LimitUsage>> {
        let limits = effective(&self.limit_settings().await?);
        let rows = sqlx::query(LIMIT_USAGE)
            .bind(to_micros(self.now()))
            .fetch_all(&self.reader)
            .await?;
        let rows = rows.iter().map(usage_row).collect::<Result<Vec<_>>>()?;
        Ok(usage(&limits, &rows))
    }

    async fn limits_apply(&self, lane: &str, kinds: &[String]) -> Result<bool> {
        Ok(applies(&self.limits_cached().await?, lane, kinds))
    }

    async fn order_blocker(
        &self,
        item: &Item,
        on_dead_letter: OnDeadLetter,
    ) -> Result<Option<OrderBlocker>> {
        let Some(group) = &item.group else {
            return Ok(None);
        };
        let r = sqlx::query(LIMIT_ORDER_BLOCKER)
            .bind(item.id)
            .bind(item.tenant_id)
            .bind(&item.kind)
            .bind(group)
            .bind(i64::from(on_dead_letter == OnDeadLetter::Hold))
            .fetch_optional(&self.reader)
            .await?;
        r.map(|r| {
            Ok(OrderBlocker {
                id: r.try_get("id")?,
                status: r.try_get::<String, _>("status")?.parse()?,
            })
        })
        .transpose()
    }
}
