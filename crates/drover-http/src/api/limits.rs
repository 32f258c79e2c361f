//! Concurrency limits over HTTP (docs/flow-control.md): the limits in
//! force with their use, and an operator's setting and clearing. A limit
//! counts every tenant's items, so every route needs a token not scoped
//! to a tenant; setting and clearing need the operator role.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use drover::store::limits::{LimitScope, LimitSpec, LimitUsage, OnDeadLetter};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::AppState;
use crate::auth::ApiPrincipal;
use crate::problem::{ApiResult, Problem};

fn unscoped(who: &ApiPrincipal) -> Result<(), Problem> {
    match who.tenant {
        None => Ok(()),
        Some(_) => Err(Problem::forbidden(
            "a limit counts every tenant's items: use a token not scoped to a tenant",
        )),
    }
}

/// A limit in force and its use.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LimitView {
    /// `lane`, `kind` or `group` (each group of the kind separately).
    #[schema(value_type = super::contract::LimitScopeName)]
    pub scope: String,
    /// The lane or kind.
    pub name: String,
    /// At most this many claimed at once.
    pub concurrency: u32,
    /// Each group runs one item at a time in enqueue order (a per-group
    /// limit of 1).
    pub ordered: bool,
    /// What an ordered group does past a dead-lettered item.
    pub on_dead_letter: DeadLetterRule,
    /// Slots held now (a per-group limit: its fullest group).
    pub in_use: u64,
    /// Available pending items it applies to.
    pub waiting: u64,
    /// `code` or `operator`.
    #[schema(value_type = super::contract::LimitSourceName)]
    pub source: String,
    /// Who set it (a token id; nil for the system, as the code's limits).
    pub set_by: Uuid,
    /// Who set it, as people read it: the token's label, `system` for the
    /// nil actor, else `token <last 8 hex digits>`.
    pub set_by_label: String,
}

impl LimitView {
    fn of(u: LimitUsage, actors: &crate::actors::Actors) -> Self {
        LimitView {
            set_by: u.setting.set_by,
            set_by_label: actors.name(u.setting.set_by),
            scope: u.setting.scope.kind_name().to_owned(),
            name: u.setting.scope.name().to_owned(),
            concurrency: u.setting.concurrency,
            ordered: u.setting.ordered,
            on_dead_letter: u.setting.on_dead_letter.into(),
            in_use: u.in_use,
            waiting: u.waiting,
            source: u.setting.source.as_str().to_owned(),
        }
    }
}

/// What an ordered group does past a dead-lettered item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetterRule {
    /// The next item of the group runs.
    #[default]
    Continue,
    /// The group waits until an operator retries or cancels the dead item.
    Hold,
}

impl From<OnDeadLetter> for DeadLetterRule {
    fn from(r: OnDeadLetter) -> Self {
        match r {
            OnDeadLetter::Continue => DeadLetterRule::Continue,
            OnDeadLetter::Hold => DeadLetterRule::Hold,
        }
    }
}

impl From<DeadLetterRule> for OnDeadLetter {
    fn from(r: DeadLetterRule) -> Self {
        match r {
            DeadLetterRule::Continue => OnDeadLetter::Continue,
            DeadLetterRule::Hold => OnDeadLetter::Hold,
        }
    }
}

/// What `PUT /v1/limits/{scope}/{name}` sets.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    /// At most this many claimed at once (1 to 100000).
    #[schema(minimum = 1, maximum = 100000)]
    #[serde(deserialize_with = "super::parse::whole")]
    pub concurrency: u32,
    /// Scope `group` with concurrency 1 only: each group's items run one
    /// at a time in enqueue order.
    #[serde(default)]
    pub ordered: bool,
    /// With `ordered`: what a dead-lettered item does to the rest of its
    /// group (default `continue`).
    #[serde(default)]
    pub on_dead_letter: DeadLetterRule,
}

/// What `DELETE /v1/limits/{scope}/{name}` did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LimitCleared {
    /// Whether an operator's setting was there to clear.
    pub cleared: bool,
}

fn scope_of(scope: &str, name: &str) -> Result<LimitScope, Problem> {
    let s = LimitScope::from_parts(scope, name).map_err(|e| Problem::from(e).field("scope"))?;
    s.validate().map_err(|e| Problem::from(e).field("name"))?;
    Ok(s)
}

/// Every limit in force, with slots in use and items waiting.
#[utoipa::path(get, path = "/v1/limits", tag = "operations",
    responses(
        (status = 200, description = "every limit in force", body = [LimitView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_limits(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<LimitView>>> {
    unscoped(&who)?;
    let limits = state.queue.limits().await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(
        limits
            .into_iter()
            .map(|u| LimitView::of(u, &actors))
            .collect(),
    ))
}

/// Set the operator's concurrency for a scope: it wins over the code's
/// until cleared, and every claimer enforces it within one poll interval
/// (operator, unscoped token).
#[utoipa::path(put, path = "/v1/limits/{scope}/{name}", tag = "operations",
    params(
        ("scope" = super::contract::LimitScopeName, Path, description = "lane, kind or group (each group of the kind)"),
        ("name" = String, Path, description = "the lane or kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    request_body = LimitRequest,
    responses(
        (status = 200, description = "set", body = LimitView),
        (status = 400, description = "invalid scope, name or concurrency, or an order asked of a scope that is not a per-group limit of 1", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn set_limit(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path((scope, name)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> ApiResult<Json<LimitView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let scope = scope_of(&scope, &name)?;
    let req: LimitRequest = super::parse::json(&body)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let s = state
        .queue
        .limit_set(
            &principal,
            &scope,
            LimitSpec {
                concurrency: req.concurrency,
                ordered: req.ordered,
                on_dead_letter: req.on_dead_letter.into(),
            },
        )
        .await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(LimitView {
        set_by: s.set_by,
        set_by_label: actors.name(s.set_by),
        scope: s.scope.kind_name().to_owned(),
        name: s.scope.name().to_owned(),
        concurrency: s.concurrency,
        ordered: s.ordered,
        on_dead_letter: s.on_dead_letter.into(),
        in_use: 0,
        waiting: 0,
        source: s.source.as_str().to_owned(),
    }))
}

/// Clear the operator's setting of a scope (the code's is in force again,
/// if any; operator, unscoped token).
#[utoipa::path(delete, path = "/v1/limits/{scope}/{name}", tag = "operations",
    params(
        ("scope" = super::contract::LimitScopeName, Path, description = "lane, kind or group"),
        ("name" = String, Path, description = "the lane or kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    responses(
        (status = 200, description = "cleared, or there was nothing to clear", body = LimitCleared),
        (status = 400, description = "invalid scope or name", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn clear_limit(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path((scope, name)): Path<(String, String)>,
) -> ApiResult<Json<LimitCleared>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let scope = scope_of(&scope, &name)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let cleared = state.queue.limit_clear(&principal, &scope).await?;
    Ok(Json(LimitCleared { cleared }))
}
