//! Fair-share mode (`drover bench --fairness`): how weighted fair share
//! between tenants serves a small tenant behind a big one, how exactly it
//! splits by weight, and what it costs, in one run on one backend.
//!
//! Every part drains its own lane with one claimer at saturation (claim a
//! batch, complete it at once), so the lane's start rate is the claim
//! loop's and every wait is queueing, not handler time:
//!
//! 1. **A big backlog and a small tenant**: tenant A enqueues `a_items`
//!    over `a_groups` groups, then tenant B `b_items`, weight 1 each. B's
//!    p99 wait against its fair-share time (B's items at half the lane's
//!    start rate), and Jain's index over the tenants with waiting work in
//!    each window of `window`.
//! 2. **Weights 3:1**: both tenants with a backlog, A at weight 3; the
//!    ratio of their starts over `ratio_starts` starts.
//! 3. **A lone tenant**: the drain of `lone_items` of one tenant on a lane
//!    with fair share on against one with it off, alternating, same run.
//! 4. **Claim cost at many tenants**: `tenants` tenants with
//!    `per_tenant` items each; claim p99 with fair share on against a lane
//!    with it off.
//! 5. **Groups inside a tenant** (a lane shared by group): tenant A
//!    enqueues `a_items` in one group, then `b_items` in a second group;
//!    tenant B `b_items` with no group. B should still get half the lane
//!    (A's groups do not buy it more) and A's small group half of A's
//!    half: each one's p99 wait against its fair-share time (its items at
//!    its share of the start rate while all three wait).

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::{Principal, Queue};
use drover::store::ClaimParams;
use drover::store::fairness::jain;
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use crate::report::Percentiles;
use crate::target::Target;
use crate::{BenchError, KIND, Progress};

/// What the fair-share mode runs.
#[derive(Debug, Clone, PartialEq)]
pub struct FairnessSpec {
    /// Tenant A's backlog in part 1.
    pub a_items: u64,
    /// The groups it is spread over.
    pub a_groups: u64,
    /// Tenant B's items in part 1.
    pub b_items: u64,
    /// Items per claim.
    pub batch: u32,
    /// The window of Jain's index.
    pub window: Duration,
    /// Starts counted in part 2.
    pub ratio_starts: u64,
    /// Items of part 3, per lane.
    pub lone_items: u64,
    /// Tenants of part 4.
    pub tenants: u64,
    /// Items per tenant in part 4.
    pub per_tenant: u64,
    /// Timed claims per lane in part 4.
    pub claims: u32,
}

impl Default for FairnessSpec {
    fn default() -> Self {
        FairnessSpec {
            a_items: 100_000,
            a_groups: 1_000,
            b_items: 1_000,
            batch: 10,
            window: Duration::from_secs(10),
            ratio_starts: 8_000,
            lone_items: 20_000,
            tenants: 1_000,
            per_tenant: 20,
            claims: 500,
        }
    }
}

/// The figures of a fair-share run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FairnessReport {
    /// The spec's sizes, as run.
    pub sizes: serde_json::Value,
    /// Part 1: the lane's start rate (items/s) while B waited.
    pub start_rate: f64,
    /// Part 1: B's waits (ms).
    pub b_wait_ms: Percentiles,
    /// Part 1: B's fair-share time: its items at half the start rate (ms).
    pub b_fair_share_ms: f64,
    /// Part 1: B's p99 wait over its fair-share time (target ≤ 2).
    pub b_p99_over_fair_share: f64,
    /// Part 1: the least Jain's index of any window (target ≥ 0.95).
    pub jain_min: f64,
    /// Part 1: windows measured.
    pub jain_windows: u64,
    /// Part 2: A's starts over B's at weights 3:1 (target 3 ± 5 %).
    pub weighted_ratio: f64,
    /// Part 3: items/s of a lone tenant, fair share on.
    pub lone_on_rate: f64,
    /// Part 3: items/s of a lone tenant, fair share off.
    pub lone_off_rate: f64,
    /// Part 3: on over off (target ≥ 0.95).
    pub lone_ratio: f64,
    /// Part 4: claim latency with fair share on (ms).
    pub many_on_ms: Percentiles,
    /// Part 4: claim latency with fair share off (ms).
    pub many_off_ms: Percentiles,
    /// Part 4: p99 on over off (target ≤ 2).
    pub many_p99_ratio: f64,
    /// Part 5: the lane's start rate (items/s) while B or A's small
    /// group waited.
    pub groups_start_rate: f64,
    /// Part 5: B's waits (ms).
    pub groups_b_wait_ms: Percentiles,
    /// Part 5: B's p99 wait over its fair-share time (its items at half
    /// the start rate).
    pub groups_b_p99_over_fair_share: f64,
    /// Part 5: the waits of A's small group (ms).
    pub groups_small_wait_ms: Percentiles,
    /// Part 5: the small group's p99 wait over its fair-share time (its
    /// items at a quarter of the start rate: half of A's half).
    pub groups_small_p99_over_fair_share: f64,
}

fn tenant(n: u64) -> Uuid {
    Uuid::from_u128(0xF000_0000_0000 + u128::from(n))
}

/// Enqueues `n` items of `t` on `lane`, each with `group(i)`.
async fn fill(
    queue: &Queue,
    lane: &str,
    t: Uuid,
    n: u64,
    group: impl Fn(u64) -> Option<String>,
) -> Result<(), BenchError> {
    let mut next = 0;
    while next < n {
        let k = (n - next).min(1_000);
        let items: Vec<NewItem> = (next..next + k)
            .map(|i| {
                let it = NewItem::new(KIND, json!({ "n": i }))
                    .with_lane(lane)
                    .with_tenant(t);
                match group(i) {
                    Some(g) => it.with_group(g),
                    None => it,
                }
            })
            .collect();
        queue.store().item_insert_many(&items).await?;
        next += k;
    }
    Ok(())
}

/// One claim of `batch` on `lane`, completed at once: the items' tenants
/// and the claim's own latency (ms).
async fn step(queue: &Queue, lane: &str, batch: u32) -> Result<(Vec<Uuid>, f64), BenchError> {
    let (got, ms) = step_groups(queue, lane, batch).await?;
    Ok((got.into_iter().map(|(t, _)| t).collect(), ms))
}

/// As [`step`], with each item's group beside its tenant.
async fn step_groups(
    queue: &Queue,
    lane: &str,
    batch: u32,
) -> Result<(Vec<(Uuid, Option<String>)>, f64), BenchError> {
    let p = ClaimParams {
        lane: lane.to_owned(),
        kinds: vec![],
        worker_id: "bench-fair".into(),
        lease: Duration::from_secs(60),
        limit: batch,
    };
    let t = Instant::now();
    let items = queue.store().item_claim(&p).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let done: Vec<drover::store::Completion> = items
        .iter()
        .filter_map(drover::store::ClaimRef::of)
        .map(|claim| drover::store::Completion {
            claim,
            result: None,
        })
        .collect();
    queue.store().item_complete_many_with(&done).await?;
    Ok((
        items.into_iter().map(|i| (i.tenant_id, i.group)).collect(),
        ms,
    ))
}

/// Runs the five parts on `target`.
///
/// # Errors
/// A statement fails.
pub(crate) async fn run(
    spec: &FairnessSpec,
    target: &Target,
    progress: &Progress,
) -> Result<FairnessReport, BenchError> {
    let queue = target.queue(4).await?;
    let mut r = FairnessReport {
        sizes: json!({
            "a_items": spec.a_items, "a_groups": spec.a_groups, "b_items": spec.b_items,
            "batch": spec.batch, "window_s": spec.window.as_secs_f64(),
            "ratio_starts": spec.ratio_starts, "lone_items": spec.lone_items,
            "tenants": spec.tenants, "per_tenant": spec.per_tenant, "claims": spec.claims,
        }),
        ..FairnessReport::default()
    };
    small_behind_big(&queue, spec, &mut r, progress).await?;
    weighted(&queue, spec, &mut r).await?;
    progress.note(&format!("weights 3:1: starts {:.3}:1", r.weighted_ratio));
    lone(&queue, spec, &mut r).await?;
    progress.note(&format!(
        "lone tenant: {:.0}/s on, {:.0}/s off ({:.3})",
        r.lone_on_rate, r.lone_off_rate, r.lone_ratio
    ));
    many(&queue, spec, &mut r).await?;
    progress.note(&format!(
        "claim p99 at {} tenants: {:.3} ms on, {:.3} ms off ({:.2}x)",
        spec.tenants, r.many_on_ms.p99, r.many_off_ms.p99, r.many_p99_ratio
    ));
    groups(&queue, spec, &mut r).await?;
    progress.note(&format!(
        "groups inside a tenant: B p99 {:.2}x its fair-share time, A's small group {:.2}x",
        r.groups_b_p99_over_fair_share, r.groups_small_p99_over_fair_share
    ));
    Ok(r)
}

/// Part 1.
async fn small_behind_big(
    queue: &Queue,
    spec: &FairnessSpec,
    r: &mut FairnessReport,
    progress: &Progress,
) -> Result<(), BenchError> {
    let (a, b) = (tenant(1), tenant(2));
    let groups = spec.a_groups.max(1);
    fill(queue, "fair_big", a, spec.a_items, |i| {
        Some(format!("g{}", i % groups))
    })
    .await?;
    fill(queue, "fair_big", b, spec.b_items, |_| None).await?;
    progress.note(&format!(
        "loaded A {} items over {groups} groups, B {}",
        spec.a_items, spec.b_items
    ));
    let t0 = Instant::now();
    let (mut b_waits, mut starts) = (Vec::new(), 0u64);
    let mut window = (0u64, 0u64);
    let (mut win_start, mut jains) = (Instant::now(), Vec::new());
    while (b_waits.len() as u64) < spec.b_items {
        let (got, _) = step(queue, "fair_big", spec.batch).await?;
        if got.is_empty() {
            break;
        }
        let at = t0.elapsed().as_secs_f64() * 1e3;
        for t in got {
            starts += 1;
            if t == b {
                b_waits.push(at);
                window.1 += 1;
            } else {
                window.0 += 1;
            }
        }
        if win_start.elapsed() >= spec.window {
            jains.push(jain(&[window.0 as f64, window.1 as f64]));
            window = (0, 0);
            win_start = Instant::now();
        }
    }
    // The last, partial window, while both still had work.
    if window.0 + window.1 > 0 {
        jains.push(jain(&[window.0 as f64, window.1 as f64]));
    }
    let elapsed = t0.elapsed().as_secs_f64();
    r.start_rate = starts as f64 / elapsed;
    r.b_wait_ms = Percentiles::of(b_waits);
    r.b_fair_share_ms = spec.b_items as f64 / (r.start_rate / 2.0) * 1e3;
    r.b_p99_over_fair_share = r.b_wait_ms.p99 / r.b_fair_share_ms;
    r.jain_min = jains.iter().copied().fold(1.0, f64::min);
    r.jain_windows = jains.len() as u64;
    progress.note(&format!(
        "B: p99 wait {:.0} ms, fair-share time {:.0} ms ({:.2}x); Jain min {:.4} over {} windows",
        r.b_wait_ms.p99, r.b_fair_share_ms, r.b_p99_over_fair_share, r.jain_min, r.jain_windows
    ));
    Ok(())
}

/// Part 2.
async fn weighted(
    queue: &Queue,
    spec: &FairnessSpec,
    r: &mut FairnessReport,
) -> Result<(), BenchError> {
    let (a, b) = (tenant(3), tenant(4));
    queue.fair_weight_set(&Principal::system(), a, 3).await?;
    fill(queue, "fair_weighted", a, spec.ratio_starts, |_| None).await?;
    fill(queue, "fair_weighted", b, spec.ratio_starts, |_| None).await?;
    let (mut na, mut nb) = (0u64, 0u64);
    while na + nb < spec.ratio_starts {
        let (got, _) = step(queue, "fair_weighted", spec.batch).await?;
        if got.is_empty() {
            break;
        }
        na += got.iter().filter(|t| **t == a).count() as u64;
        nb += got.iter().filter(|t| **t == b).count() as u64;
    }
    queue.fair_weight_clear(&Principal::system(), a).await?;
    r.weighted_ratio = na as f64 / nb.max(1) as f64;
    Ok(())
}

/// Drains `lane` to empty; items/s.
async fn drain(queue: &Queue, lane: &str, batch: u32) -> Result<f64, BenchError> {
    let t = Instant::now();
    let mut n = 0u64;
    loop {
        let (got, _) = step(queue, lane, batch).await?;
        if got.is_empty() {
            break;
        }
        n += got.len() as u64;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Part 3: two rounds, the order alternating.
async fn lone(
    queue: &Queue,
    spec: &FairnessSpec,
    r: &mut FairnessReport,
) -> Result<(), BenchError> {
    queue
        .fair_lane_set(&Principal::system(), "fair_lone_off", false)
        .await?;
    let t = tenant(5);
    let half = spec.lone_items / 2;
    let (mut on, mut off) = (0.0, 0.0);
    for round in 0..2 {
        fill(queue, "fair_lone_on", t, half, |_| None).await?;
        fill(queue, "fair_lone_off", t, half, |_| None).await?;
        if round == 0 {
            on += drain(queue, "fair_lone_on", spec.batch).await?;
            off += drain(queue, "fair_lone_off", spec.batch).await?;
        } else {
            off += drain(queue, "fair_lone_off", spec.batch).await?;
            on += drain(queue, "fair_lone_on", spec.batch).await?;
        }
    }
    r.lone_on_rate = on / 2.0;
    r.lone_off_rate = off / 2.0;
    r.lone_ratio = r.lone_on_rate / r.lone_off_rate.max(f64::MIN_POSITIVE);
    Ok(())
}

/// Part 4: the lanes' claims alternate in blocks, so drift falls on both.
async fn many(
    queue: &Queue,
    spec: &FairnessSpec,
    r: &mut FairnessReport,
) -> Result<(), BenchError> {
    queue
        .fair_lane_set(&Principal::system(), "fair_many_off", false)
        .await?;
    for n in 0..spec.tenants {
        let t = tenant(100 + n);
        fill(queue, "fair_many_on", t, spec.per_tenant, |_| None).await?;
        fill(queue, "fair_many_off", t, spec.per_tenant, |_| None).await?;
    }
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let block = (spec.claims / 4).max(1);
    for b in 0..4 {
        let order = if b % 2 == 0 {
            [("fair_many_on", &mut on), ("fair_many_off", &mut off)]
        } else {
            [("fair_many_off", &mut off), ("fair_many_on", &mut on)]
        };
        for (lane, into) in order {
            for _ in 0..block {
                let (got, ms) = step(queue, lane, spec.batch).await?;
                if got.is_empty() {
                    break;
                }
                into.push(ms);
            }
        }
    }
    r.many_on_ms = Percentiles::of(on);
    r.many_off_ms = Percentiles::of(off);
    r.many_p99_ratio = r.many_on_ms.p99 / r.many_off_ms.p99.max(f64::MIN_POSITIVE);
    Ok(())
}

/// Part 5: on a lane shared by group, A's big group, A's small group and
/// B, until B and the small group have all started.
async fn groups(
    queue: &Queue,
    spec: &FairnessSpec,
    r: &mut FairnessReport,
) -> Result<(), BenchError> {
    const LANE: &str = "fair_groups";
    let (a, b) = (tenant(6), tenant(7));
    queue
        .fair_lane_mode_set(&Principal::system(), LANE, true, true)
        .await?;
    fill(queue, LANE, a, spec.a_items, |_| Some("big".into())).await?;
    fill(queue, LANE, a, spec.b_items, |_| Some("small".into())).await?;
    fill(queue, LANE, b, spec.b_items, |_| None).await?;
    let t0 = Instant::now();
    let (mut b_waits, mut small_waits, mut starts) = (Vec::new(), Vec::new(), 0u64);
    while (b_waits.len() as u64) < spec.b_items || (small_waits.len() as u64) < spec.b_items {
        let (got, _) = step_groups(queue, LANE, spec.batch).await?;
        if got.is_empty() {
            break;
        }
        let at = t0.elapsed().as_secs_f64() * 1e3;
        for (t, group) in got {
            starts += 1;
            if t == b {
                b_waits.push(at);
            } else if group.as_deref() == Some("small") {
                small_waits.push(at);
            }
        }
    }
    r.groups_start_rate = starts as f64 / t0.elapsed().as_secs_f64();
    let fair = |share: f64| spec.b_items as f64 / (r.groups_start_rate * share) * 1e3;
    r.groups_b_wait_ms = Percentiles::of(b_waits);
    r.groups_small_wait_ms = Percentiles::of(small_waits);
    r.groups_b_p99_over_fair_share = r.groups_b_wait_ms.p99 / fair(0.5);
    r.groups_small_p99_over_fair_share = r.groups_small_wait_ms.p99 / fair(0.25);
    Ok(())
}
