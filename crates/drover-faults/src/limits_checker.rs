//! The history checker of concurrency limits and groups: from the queue's
//! own row history (`transitions`), the handler's run records (`runs`) and
//! the scenario's enqueue order (`enqueue_order`), what a run of a limited,
//! grouped kind did, as [`LimitFigures`].
//!
//! | figure | from |
//! |---|---|
//! | `beyond_kind_limit`, `beyond_group_limit` | claims that took a slot while the kind's (a group's) slots were all held: the claim intervals, each from the write that claimed the item to the write that ended that claim (the sweep's hand-back for a lapsed lease), or to its last lease where the history has no end |
//! | `group_overlaps` | pairs of handler runs of one group that overlapped, other than inside a lease-loss window |
//! | `out_of_order` | items whose first run started before an earlier item of their group (enqueue order) was final |
//!
//! Lost items and duplicate completions are the [`crate::checker`]'s.
//!
//! **Clock.** Every time is the database's clock, in microseconds:
//! PostgreSQL's `clock_timestamp()` (the trigger's and the run records'),
//! SQLite's `julianday('now')` (millisecond resolution). Intervals are
//! half-open: a claim that ends at the instant another starts does not
//! overlap it. A write that ends a claim is stamped before it commits and
//! a claim is stamped after the claimer read the slots held, so a store
//! that keeps its limits never shows two claims overlapping beyond them.
//!
//! **A lease-loss window.** A run records its end before its handler
//! returns, and only then does the worker write the outcome that ends the
//! claim; a run that ends after its claim ended therefore lost it while it
//! ran (a lapsed lease handed back by the sweep, or a release after failing
//! renewals) and the runtime cancels it. From the end of its claim to the
//! end of the run, the next holder of the group's slot may already run: an
//! overlap inside that window is allowed, any other is a violation. A run
//! without a recorded end (its process was killed) is bounded by the end of
//! its claim.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row, SqlitePool};
use uuid::Uuid;

use crate::checker::Figures;

/// Microseconds since the epoch, on the database's clock.
pub type Micros = i64;

/// One row of `transitions`, as the checker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The item.
    pub item: Uuid,
    /// Its status before the write.
    pub old_status: Option<String>,
    /// Its status after.
    pub new_status: Option<String>,
    /// Its claim number before.
    pub old_seq: Option<i64>,
    /// Its claim number after.
    pub new_seq: Option<i64>,
    /// Its lease after.
    pub new_lease: Option<Micros>,
    /// When the write ran.
    pub at: Micros,
}

/// One claim of an item: from the write that claimed it to the write that
/// ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The item.
    pub item: Uuid,
    /// Its group.
    pub group: Option<String>,
    /// The claim's fencing number.
    pub token: i64,
    /// When it was claimed.
    pub start: Micros,
    /// When the claim ended (`None`: not in the history).
    pub end: Option<Micros>,
    /// The status the ending write left (`pending` for a hand-back).
    pub ended_as: Option<String>,
    /// Its last lease.
    pub lease: Option<Micros>,
}

impl Claim {
    /// Until when it held its slots: its end, else its last lease.
    pub fn until(&self) -> Micros {
        self.end.or(self.lease).unwrap_or(Micros::MAX)
    }
}

/// One handler run, as `runs` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The item.
    pub item: Uuid,
    /// Its group.
    pub group: Option<String>,
    /// The claim it ran under.
    pub token: i64,
    /// When it started.
    pub start: Micros,
    /// When it ended (`None`: its process died first).
    pub end: Option<Micros>,
}

/// An item's place in its group's enqueue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The item.
    pub item: Uuid,
    /// Its group.
    pub group: String,
    /// Its place (lower: enqueued earlier, in an enqueue that committed first).
    pub pos: i64,
}

/// What the checker reads of one run of the scenario.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every claim of the limited kind's items.
    pub claims: Vec<Claim>,
    /// Every handler run.
    pub runs: Vec<Run>,
    /// The enqueue order of the grouped items.
    pub order: Vec<Queued>,
    /// When each item first became final.
    pub finals: HashMap<Uuid, Micros>,
}

fn is(s: &Option<String>, want: &str) -> bool {
    s.as_deref() == Some(want)
}

const FINAL: [&str; 3] = ["done", "failed", "cancelled"];

impl History {
    /// The claims and final times from `transitions` (in the order they
    /// were written) of the items in `groups` (the limited kind's, with
    /// their groups).
    pub fn from_transitions(
        transitions: &[Transition],
        groups: &HashMap<Uuid, Option<String>>,
    ) -> History {
        let mut h = History::default();
        let mut open: HashMap<(Uuid, i64), usize> = HashMap::new();
        for t in transitions {
            let Some(group) = groups.get(&t.item) else {
                continue;
            };
            let was_claimed = is(&t.old_status, "claimed");
            let now_claimed = is(&t.new_status, "claimed");
            let same_claim = was_claimed && now_claimed && t.old_seq == t.new_seq;
            if was_claimed
                && !same_claim
                && let Some(i) = t.old_seq.and_then(|s| open.remove(&(t.item, s)))
            {
                h.claims[i].end = Some(t.at);
                h.claims[i].ended_as = t.new_status.clone();
            }
            if now_claimed {
                let token = t.new_seq.unwrap_or(0);
                if same_claim {
                    if let Some(&i) = open.get(&(t.item, token)) {
                        h.claims[i].lease = t.new_lease;
                    }
                } else {
                    open.insert((t.item, token), h.claims.len());
                    h.claims.push(Claim {
                        item: t.item,
                        group: group.clone(),
                        token,
                        start: t.at,
                        end: None,
                        ended_as: None,
                        lease: t.new_lease,
                    });
                }
            }
            let entered_final = t.new_status.as_deref().is_some_and(|s| FINAL.contains(&s))
                && t.old_status != t.new_status;
            if entered_final {
                h.finals.entry(t.item).or_insert(t.at);
            }
        }
        h
    }
}

/// The limits the run was under, and which checks to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitConfig {
    /// The kind's concurrency.
    pub kind: u32,
    /// Each group's concurrency.
    pub per_group: u32,
    /// Whether to check each group's enqueue order (an ordered limit).
    pub check_order: bool,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitFigures {
    /// Claims in the history.
    pub claims: usize,
    /// Claims the history has no end for (bounded by their last lease).
    pub unended_claims: usize,
    /// Handler runs in the history.
    pub runs: usize,
    /// The most claims of the kind holding a slot at once.
    pub kind_max_held: u64,
    /// The most claims of one group holding its slot at once.
    pub group_max_held: u64,
    /// Claims that took a slot of the kind while all were held.
    pub beyond_kind_limit: u64,
    /// Claims that took a group's slot while all were held.
    pub beyond_group_limit: u64,
    /// Overlapping runs of one group outside every lease-loss window.
    pub group_overlaps: u64,
    /// Overlapping runs of one group inside a lease-loss window (allowed).
    pub lease_loss_overlaps: u64,
    /// Items started before an earlier item of their group was final
    /// (`None`: not checked).
    pub out_of_order: Option<u64>,
}

impl LimitFigures {
    /// Claims beyond a limit, the kind's and the groups' together.
    pub fn beyond_limit(&self) -> u64 {
        self.beyond_kind_limit + self.beyond_group_limit
    }

    /// The five counts of the acceptance (with `f`'s lost items and
    /// duplicate completions), then the detail.
    pub fn summary(&self, f: &Figures, cfg: &LimitConfig) -> String {
        let order = self
            .out_of_order
            .map_or_else(|| "not checked".to_owned(), |n| n.to_string());
        format!(
            "beyond limit {} (kind {}, group {}) | group overlaps outside lease-loss windows {} | out of enqueue order {order} | lost {} | duplicate completions {} \
             || most held: kind {}/{}, group {}/{} | lease-loss overlaps {} | claims {} ({} unended) | runs {}",
            self.beyond_limit(),
            self.beyond_kind_limit,
            self.beyond_group_limit,
            self.group_overlaps,
            f.lost,
            f.duplicate_completions,
            self.kind_max_held,
            cfg.kind,
            self.group_max_held,
            cfg.per_group,
            self.lease_loss_overlaps,
            self.claims,
            self.unended_claims,
            self.runs
        )
    }
}

/// The most claims holding a slot at once among `claims`, and how many
/// claims took one while `limit` were held.
fn slots<'a>(claims: impl Iterator<Item = &'a Claim>, limit: u32) -> (u64, u64) {
    // Ends sort before starts at one instant (half-open intervals); a claim
    // ended at the instant it began held nothing.
    let mut events: Vec<(Micros, bool)> = Vec::new();
    for c in claims.filter(|c| c.until() > c.start) {
        events.push((c.start, true));
        events.push((c.until(), false));
    }
    events.sort_unstable();
    let (mut held, mut most, mut beyond) = (0u64, 0u64, 0u64);
    for (_, start) in events {
        if start {
            held += 1;
            most = most.max(held);
            if held > u64::from(limit) {
                beyond += 1;
            }
        } else {
            held = held.saturating_sub(1);
        }
    }
    (most, beyond)
}

/// Overlapping runs of each group: (outside every lease-loss window,
/// inside one).
fn overlaps(h: &History) -> (u64, u64) {
    let claims: HashMap<(Uuid, i64), &Claim> =
        h.claims.iter().map(|c| ((c.item, c.token), c)).collect();
    // (start, end, lease-loss window) of each run, by group.
    type Span = (Micros, Micros, Option<(Micros, Micros)>);
    let mut by_group: HashMap<&str, Vec<Span>> = HashMap::new();
    for r in &h.runs {
        let Some(g) = r.group.as_deref() else {
            continue;
        };
        let claim = claims.get(&(r.item, r.token));
        let end = r
            .end
            .or_else(|| claim.map(|c| c.until()))
            .unwrap_or(Micros::MAX);
        let window = claim.and_then(|c| {
            let lost = c.end.is_some_and(|e| e < end) && !is(&c.ended_as, "done");
            lost.then(|| (c.until(), end))
        });
        by_group.entry(g).or_default().push((r.start, end, window));
    }
    let (mut outside, mut inside) = (0, 0);
    for spans in by_group.values_mut() {
        spans.sort_unstable_by_key(|s| (s.0, s.1));
        for (j, b) in spans.iter().enumerate() {
            for a in &spans[..j] {
                let (from, to) = (b.0, a.1.min(b.1));
                if from >= to {
                    continue;
                }
                let within =
                    |w: Option<(Micros, Micros)>| w.is_some_and(|(ws, we)| ws <= from && to <= we);
                if within(a.2) || within(b.2) {
                    inside += 1;
                } else {
                    outside += 1;
                }
            }
        }
    }
    (outside, inside)
}

/// Items whose first run started before an earlier item of their group was
/// final.
fn out_of_order(h: &History) -> u64 {
    let mut first: HashMap<Uuid, Micros> = HashMap::new();
    for r in &h.runs {
        first
            .entry(r.item)
            .and_modify(|s| *s = (*s).min(r.start))
            .or_insert(r.start);
    }
    let mut by_group: HashMap<&str, Vec<&Queued>> = HashMap::new();
    for q in &h.order {
        by_group.entry(&q.group).or_default().push(q);
    }
    let mut late = 0;
    for items in by_group.values_mut() {
        items.sort_unstable_by_key(|q| q.pos);
        // When every item enqueued before this one was final.
        let mut earlier_final = Micros::MIN;
        for q in items.iter() {
            if first.get(&q.item).is_some_and(|&s| s < earlier_final) {
                late += 1;
            }
            let fin = h.finals.get(&q.item).copied().unwrap_or(Micros::MAX);
            earlier_final = earlier_final.max(fin);
        }
    }
    late
}

/// Checks `h` against `cfg`.
pub fn check(h: &History, cfg: &LimitConfig) -> LimitFigures {
    let (kind_max_held, beyond_kind_limit) = slots(h.claims.iter(), cfg.kind);
    let groups: HashSet<&str> = h.claims.iter().filter_map(|c| c.group.as_deref()).collect();
    let (mut group_max_held, mut beyond_group_limit) = (0, 0);
    for g in groups {
        let of_group = h.claims.iter().filter(|c| c.group.as_deref() == Some(g));
        let (most, beyond) = slots(of_group, cfg.per_group);
        group_max_held = group_max_held.max(most);
        beyond_group_limit += beyond;
    }
    let (group_overlaps, lease_loss_overlaps) = overlaps(h);
    LimitFigures {
        claims: h.claims.len(),
        unended_claims: h.claims.iter().filter(|c| c.end.is_none()).count(),
        runs: h.runs.len(),
        kind_max_held,
        group_max_held,
        beyond_kind_limit,
        beyond_group_limit,
        group_overlaps,
        lease_loss_overlaps,
        out_of_order: cfg.check_order.then(|| out_of_order(h)),
    }
}

fn micros(t: Option<DateTime<Utc>>) -> Option<Micros> {
    t.map(|t| t.timestamp_micros())
}

/// The history of the items of `kind` in a PostgreSQL run in `schema`.
///
/// # Errors
/// The database's.
pub async fn pg_history(pool: &PgPool, schema: &str, kind: &str) -> Result<History, sqlx::Error> {
    let s = format!("\"{schema}\"");
    let groups: HashMap<Uuid, Option<String>> = sqlx::query_as(&format!(
        "SELECT id, group_key FROM {s}.items WHERE kind = $1"
    ))
    .bind(kind)
    .fetch_all(pool)
    .await?
    .into_iter()
    .collect();
    let rows = sqlx::query(&format!(
        "SELECT t.item_id, t.old_status, t.new_status, t.old_seq, t.new_seq, t.new_lease, t.at \
         FROM {s}.transitions t JOIN {s}.items i ON i.id = t.item_id WHERE i.kind = $1 ORDER BY t.seq"
    ))
    .bind(kind)
    .fetch_all(pool)
    .await?;
    let mut transitions = Vec::with_capacity(rows.len());
    for r in rows {
        transitions.push(Transition {
            item: r.try_get("item_id")?,
            old_status: r.try_get("old_status")?,
            new_status: r.try_get("new_status")?,
            old_seq: r.try_get("old_seq")?,
            new_seq: r.try_get("new_seq")?,
            new_lease: micros(r.try_get("new_lease")?),
            at: r.try_get::<DateTime<Utc>, _>("at")?.timestamp_micros(),
        });
    }
    let mut h = History::from_transitions(&transitions, &groups);
    for r in sqlx::query(&format!(
        "SELECT item_id, group_key, fencing_token, started_at, ended_at FROM {s}.runs"
    ))
    .fetch_all(pool)
    .await?
    {
        h.runs.push(Run {
            item: r.try_get("item_id")?,
            group: r.try_get("group_key")?,
            token: r.try_get("fencing_token")?,
            start: r
                .try_get::<DateTime<Utc>, _>("started_at")?
                .timestamp_micros(),
            end: micros(r.try_get("ended_at")?),
        });
    }
    let order: Vec<(Uuid, String, i32)> = sqlx::query_as(&format!(
        "SELECT item_id, group_key, pos FROM {s}.enqueue_order"
    ))
    .fetch_all(pool)
    .await?;
    h.order = order
        .into_iter()
        .map(|(item, group, pos)| Queued {
            item,
            group,
            pos: i64::from(pos),
        })
        .collect();
    Ok(h)
}

/// The history of the items of `kind` in a SQLite run.
///
/// # Errors
/// The database's.
pub async fn sqlite_history(pool: &SqlitePool, kind: &str) -> Result<History, sqlx::Error> {
    let groups: HashMap<Uuid, Option<String>> =
        sqlx::query_as("SELECT id, group_key FROM items WHERE kind = ?1")
            .bind(kind)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    let rows = sqlx::query(
        "SELECT t.item_id, t.old_status, t.new_status, t.old_seq, t.new_seq, t.new_lease, t.at \
         FROM transitions t JOIN items i ON i.id = t.item_id WHERE i.kind = ?1 ORDER BY t.seq",
    )
    .bind(kind)
    .fetch_all(pool)
    .await?;
    let mut transitions = Vec::with_capacity(rows.len());
    for r in rows {
        transitions.push(Transition {
            item: r.try_get("item_id")?,
            old_status: r.try_get("old_status")?,
            new_status: r.try_get("new_status")?,
            old_seq: r.try_get("old_seq")?,
            new_seq: r.try_get("new_seq")?,
            new_lease: r.try_get("new_lease")?,
            at: r.try_get("at")?,
        });
    }
    let mut h = History::from_transitions(&transitions, &groups);
    for r in sqlx::query("SELECT item_id, group_key, fencing_token, started_at, ended_at FROM runs")
        .fetch_all(pool)
        .await?
    {
        h.runs.push(Run {
            item: r.try_get("item_id")?,
            group: r.try_get("group_key")?,
            token: r.try_get("fencing_token")?,
            start: r.try_get("started_at")?,
            end: r.try_get("ended_at")?,
        });
    }
    h.order = sqlx::query_as::<_, (Uuid, String, i64)>(
        "SELECT item_id, group_key, pos FROM enqueue_order",
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|(item, group, pos)| Queued { item, group, pos })
    .collect();
    Ok(h)
}

/// Records `items` (item, group, place in its group) in `enqueue_order`
/// (PostgreSQL, `schema`).
///
/// # Errors
/// The database's.
pub async fn pg_record_order(
    pool: &PgPool,
    schema: &str,
    items: &[(Uuid, String, i32)],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = items.iter().map(|i| i.0).collect();
    let groups: Vec<String> = items.iter().map(|i| i.1.clone()).collect();
    let pos: Vec<i32> = items.iter().map(|i| i.2).collect();
    sqlx::query(&format!(
        r#"INSERT INTO "{schema}".enqueue_order (item_id, group_key, pos) SELECT * FROM unnest($1::uuid[], $2::text[], $3::int4[])"#
    ))
    .bind(ids)
    .bind(groups)
    .bind(pos)
    .execute(pool)
    .await?;
    Ok(())
}

/// Records `items` (item, group, place in its group) in `enqueue_order`
/// (SQLite).
///
/// # Errors
/// The database's.
pub async fn sqlite_record_order(
    pool: &SqlitePool,
    items: &[(Uuid, String, i32)],
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for (id, group, pos) in items {
        sqlx::query("INSERT INTO enqueue_order (item_id, group_key, pos) VALUES (?1, ?2, ?3)")
            .bind(id.as_bytes().to_vec())
            .bind(group)
            .bind(pos)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
#[path = "limits_checker/tests.rs"]
mod tests;
