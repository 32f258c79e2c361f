//! Lanes, workers, stats and gauges, schedules and orchestrations.
//!
//! Counts and gauges are cross-tenant aggregates (system operations of the
//! store): a tenant-scoped token is refused them (403) rather than shown
//! totals that include other tenants. Workers (their hosts, process ids,
//! lanes) and the periodic schedules are the installation's, not a
//! tenant's: they too are refused to a tenant-scoped token, and the
//! dashboard follows the same rule (`unscoped`).

use std::collections::BTreeMap;

use axum::extract::{RawQuery, State};
use axum::{Extension, Json};
use drover::Status;
use drover::orchestration::OrchestrationFilter;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::parse;
use crate::AppState;
use crate::auth::ApiPrincipal;
use crate::problem::{ApiResult, Problem};

/// Refuses a tenant-scoped token an installation-wide view (403).
///
/// # Errors
/// [`Problem::forbidden`] for a token scoped to a tenant.
fn unscoped(who: &ApiPrincipal) -> Result<(), Problem> {
    match who.tenant {
        None => Ok(()),
        Some(_) => Err(Problem::forbidden(
            "installation-wide data (counts, workers, schedules) needs a token \
             that is not scoped to a tenant",
        )),
    }
}

/// Items per status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct StatusCounts {
    /// Pending.
    pub pending: i64,
    /// Claimed.
    pub claimed: i64,
    /// Done.
    pub done: i64,
    /// Failed (the dead letter).
    pub failed: i64,
    /// Cancelled.
    pub cancelled: i64,
}

impl StatusCounts {
    fn add(&mut self, s: Status, n: i64) {
        match s {
            Status::Pending => self.pending += n,
            Status::Claimed => self.claimed += n,
            Status::Done => self.done += n,
            Status::Failed => self.failed += n,
            Status::Cancelled => self.cancelled += n,
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
}

/// The live view's newest snapshot (at most one refresh interval old; the
/// first call reads one). A snapshot whose refresh failed answers 503: the
/// API never passes off older counts as current.
async fn fresh_snapshot(
    state: &AppState,
) -> ApiResult<std::sync::Arc<crate::dashboard::live::Snapshot>> {
    let snap = state.live.latest().await;
    match &snap.error {
        None => Ok(snap),
        Some(e) => {
            tracing::warn!(error = %e, "counts unavailable: the live view's last refresh failed");
            Err(Problem::unavailable(
                "the counts could not be read; retry shortly",
            ))
        }
    }
}

/// A lane with its counts and the age of its oldest waiting item.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneView {
    /// The lane.
    pub lane: String,
    /// Items per status.
    pub counts: StatusCounts,
    /// Seconds the oldest available pending item has waited (0: none).
    pub oldest_waiting_seconds: f64,
}

/// Lanes with counts and the oldest waiting age.
#[utoipa::path(get, path = "/v1/lanes", tag = "operations",
    responses(
        (status = 200, description = "every lane", body = [LaneView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn lanes(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<LaneView>>> {
    unscoped(&who)?;
    let snap = fresh_snapshot(&state).await?;
    let (counts, gauges) = (&snap.counts, &snap.gauges);
    let mut by_lane: BTreeMap<String, StatusCounts> = BTreeMap::new();
    for c in counts {
        by_lane
            .entry(c.lane.clone())
            .or_default()
            .add(c.status, c.count);
    }
    for (lane, _) in &gauges.oldest_age_seconds {
        by_lane.entry(lane.clone()).or_default();
    }
    Ok(Json(
        by_lane
            .into_iter()
            .map(|(lane, counts)| {
                let oldest = gauges
                    .oldest_age_seconds
                    .iter()
                    .find(|(l, _)| *l == lane)
                    .map_or(0.0, |(_, a)| *a);
                LaneView {
                    lane,
                    counts,
                    oldest_waiting_seconds: oldest,
                }
            })
            .collect(),
    ))
}

/// A worker's liveness.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerView {
    /// Its id.
    pub id: String,
    /// `running` (live), `draining`, `offline` or `lost` (stopped beating).
    #[schema(value_type = super::contract::WorkerState)]
    pub state: String,
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Lanes it drains.
    pub lanes: Vec<String>,
    /// Kinds it handles (empty: not recorded, a worker of a version before
    /// the list was kept; read as any kind).
    pub kinds: Vec<String>,
    /// Capacity.
    pub capacity: i32,
    /// When it started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Its last beat.
    pub last_beat_at: chrono::DateTime<chrono::Utc>,
}

/// Workers: live, draining, offline or lost, with their last beat.
///
/// Unscoped tokens only: hosts and process ids are the installation's.
#[utoipa::path(get, path = "/v1/workers", tag = "operations",
    responses(
        (status = 200, description = "every worker row", body = [WorkerView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn workers(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<WorkerView>>> {
    unscoped(&who)?;
    let rows = state.queue.workers().await?;
    Ok(Json(
        rows.into_iter()
            .map(|w| WorkerView {
                id: w.id,
                state: w.state,
                host: w.host,
                pid: w.pid,
                lanes: w.lanes,
                kinds: w.kinds,
                capacity: w.capacity,
                started_at: w.started_at,
                last_beat_at: w.last_beat_at,
            })
            .collect(),
    ))
}

/// A kind's counts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KindStats {
    /// The kind.
    pub kind: String,
    /// Items per status.
    pub counts: StatusCounts,
    /// False when no registration on this server knows the kind.
    pub known: bool,
}

/// Counts and gauges.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatsView {
    /// Items per status, every lane.
    pub totals: StatusCounts,
    /// Per kind.
    pub kinds: Vec<KindStats>,
    /// Kinds with pending items that no registration on this server
    /// knows: they wait for a worker that handles them, never dropped.
    pub unhandled_kinds: Vec<String>,
    /// Items in the dead letter.
    pub dead_letter: i64,
    /// Per lane, seconds the oldest available pending item has waited.
    pub oldest_waiting_seconds: BTreeMap<String, f64>,
    /// Workers per state.
    pub workers: BTreeMap<String, u64>,
}

/// Counts per status and kind, the gauges, and the kinds nobody handles.
#[utoipa::path(get, path = "/v1/stats", tag = "operations",
    responses(
        (status = 200, description = "counts and gauges", body = StatsView),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn stats(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<StatsView>> {
    unscoped(&who)?;
    let snap = fresh_snapshot(&state).await?;
    let (counts, gauges, workers) = (&snap.counts, &snap.gauges, &snap.workers);
    let mut totals = StatusCounts::default();
    let mut kinds: BTreeMap<String, StatusCounts> = BTreeMap::new();
    for c in counts {
        totals.add(c.status, c.count);
        kinds
            .entry(c.kind.clone())
            .or_default()
            .add(c.status, c.count);
    }
    let mut per_state: BTreeMap<String, u64> = BTreeMap::new();
    for w in workers {
        *per_state.entry(w.state.clone()).or_default() += 1;
    }
    let kinds: Vec<KindStats> = kinds
        .into_iter()
        .map(|(kind, counts)| KindStats {
            known: state.queue.kind_registered(&kind),
            kind,
            counts,
        })
        .collect();
    Ok(Json(StatsView {
        totals,
        unhandled_kinds: kinds
            .iter()
            .filter(|k| !k.known && k.counts.pending > 0)
            .map(|k| k.kind.clone())
            .collect(),
        kinds,
        dead_letter: gauges.failed,
        oldest_waiting_seconds: gauges.oldest_age_seconds.iter().cloned().collect(),
        workers: per_state,
    }))
}

/// A periodic schedule's state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// Its cron expression.
    pub cron: String,
    /// Its zone.
    pub zone: String,
    /// The kind it enqueues.
    pub kind: String,
    /// The lane.
    pub lane: String,
    /// The last tick enqueued.
    #[schema(nullable = true)]
    pub last_tick: Option<chrono::DateTime<chrono::Utc>>,
    /// When a scheduler last saw it.
    pub seen_at: chrono::DateTime<chrono::Utc>,
}

/// The periodic schedules (the installation's: unscoped tokens).
#[utoipa::path(get, path = "/v1/schedules", tag = "operations",
    responses(
        (status = 200, description = "every schedule", body = [ScheduleView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn schedules(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<ScheduleView>>> {
    unscoped(&who)?;
    let rows = state.queue.schedule_list().await?;
    Ok(Json(
        rows.into_iter()
            .map(|r| ScheduleView {
                name: r.decl.name,
                cron: r.decl.cron,
                zone: r.decl.zone,
                kind: r.decl.kind,
                lane: r.decl.lane,
                last_tick: r.last_tick,
                seen_at: r.seen_at,
            })
            .collect(),
    ))
}

/// The filters of the orchestration listing.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OrchestrationQuery {
    /// The tenant (unscoped tokens; omitted: every tenant).
    pub tenant: Option<Uuid>,
    /// The orchestration type.
    #[param(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub kind: Option<String>,
    /// At most this many (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// An orchestration record, as stored (its state and history as JSON).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OrchestrationView {
    /// Its id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// Its type.
    pub kind: String,
    /// Its status.
    #[schema(value_type = super::contract::OrchestrationState)]
    pub status: String,
    /// Its current step.
    pub step: String,
    /// The whole record.
    #[schema(value_type = Object)]
    pub record: serde_json::Value,
}

/// Orchestrations, newest first.
#[utoipa::path(get, path = "/v1/orchestrations", tag = "operations", params(OrchestrationQuery),
    responses(
        (status = 200, description = "orchestrations", body = [OrchestrationView]),
        (status = 400, description = "invalid filter", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn orchestrations(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Vec<OrchestrationView>>> {
    let q: OrchestrationQuery = parse::query(raw.as_deref())?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(Problem::invalid("limit", "must be 1 to 500"));
    }
    if let Some(k) = &q.kind {
        drover::item::validate_kind(k).map_err(|e| Problem::from(e).field("kind"))?;
    }
    let tenant_id = match who.tenant {
        Some(_) => Some(who.tenant_for(q.tenant)?),
        None => q.tenant,
    };
    let rows = state
        .queue
        .orchestrations(&OrchestrationFilter {
            tenant_id,
            status: None,
            kind: q.kind,
            limit,
        })
        .await?;
    Ok(Json(
        rows.into_iter()
            .map(|o| {
                let record = serde_json::to_value(&o).unwrap_or(serde_json::Value::Null);
                let status = serde_json::to_value(o.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                OrchestrationView {
                    id: o.id,
                    tenant_id: o.tenant_id,
                    kind: o.kind,
                    status,
                    step: o.step,
                    record,
                }
            })
            .collect(),
    ))
}

/// A lane's persisted state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneStateView {
    /// The lane.
    pub lane: String,
    /// True while workers leave it alone.
    pub paused: bool,
    /// When it was last paused or resumed.
    pub changed_at: chrono::DateTime<chrono::Utc>,
    /// Who did it (a token id; nil for the system).
    pub changed_by: Uuid,
    /// Who did it, as people read it: the token's label, `system` for the
    /// nil actor, else `token <last 8 hex digits>`.
    pub changed_by_label: String,
}

async fn lane_set(
    state: AppState,
    who: ApiPrincipal,
    lane: String,
    paused: bool,
) -> ApiResult<Json<LaneStateView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    drover::item::validate_lane(&lane).map_err(|e| Problem::from(e).field("lane"))?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let s = if paused {
        state.queue.lane_pause(&principal, &lane).await?
    } else {
        state.queue.lane_resume(&principal, &lane).await?
    };
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(LaneStateView {
        changed_by_label: actors.name(s.changed_by),
        lane: s.lane,
        paused: s.paused,
        changed_at: s.changed_at,
        changed_by: s.changed_by,
    }))
}

/// Pause a lane: no worker claims from it within one poll interval
/// (operator, unscoped token; persisted, idempotent).
#[utoipa::path(post, path = "/v1/lanes/{lane}/pause", tag = "operations",
    params(("lane" = String, Path, description = "the lane", pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "paused", body = LaneStateView),
        (status = 400, description = "invalid lane", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn lane_pause(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    axum::extract::Path(lane): axum::extract::Path<String>,
) -> ApiResult<Json<LaneStateView>> {
    lane_set(state, who, lane, true).await
}

/// Resume a lane (operator, unscoped token; persisted, idempotent).
#[utoipa::path(post, path = "/v1/lanes/{lane}/resume", tag = "operations",
    params(("lane" = String, Path, description = "the lane", pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "resumed", body = LaneStateView),
        (status = 400, description = "invalid lane", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn lane_resume(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    axum::extract::Path(lane): axum::extract::Path<String>,
) -> ApiResult<Json<LaneStateView>> {
    lane_set(state, who, lane, false).await
}

/// Trigger a schedule now: one item of it outside its ticks, under the key
/// `periodic:NAME:manual:ID`, created by the token (operator, unscoped
/// token). Only a schedule the serving binary declares can be triggered:
/// its payload is in its code, not in the state table.
#[utoipa::path(post, path = "/v1/schedules/{name}/trigger", tag = "operations",
    params(("name" = String, Path, description = "the schedule's name", min_length = 1, max_length = 128)),
    responses(
        (status = 200, description = "the item enqueued", body = crate::api::views::ItemView),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no schedule of that name is declared by this server", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn schedule_trigger(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> ApiResult<Json<crate::api::views::ItemView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let Some(schedule) = state.config.dashboard.schedules.get(&name) else {
        return Err(Problem::not_found(format!(
            "schedule {name:?} is not declared by this server: run \
             `<service> schedules trigger {name}` from the binary that declares it"
        )));
    };
    let item = schedule.manual_item();
    let permission = state.queue.kind_permission(&item.kind);
    let principal = who.queue_principal(item.tenant_id, Some(&permission));
    let out = state.queue.enqueue_item(&principal, item).await?;
    tracing::info!(token = %who.token_id, schedule = %name, item = %out.item.id,
        "schedule triggered over the API");
    Ok(Json(out.item.into()))
}
