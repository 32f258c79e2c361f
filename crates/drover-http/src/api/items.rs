//! Items: enqueue one or a batch (with `Idempotency-Key`), list with
//! filters and a cursor, read one with its audit, retry and cancel one.
//!
//! Every read and write goes to the store under the principal's tenant
//! when the token is tenant-scoped (PostgreSQL's RLS then confines it);
//! only an unscoped token lists across tenants.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use drover::store::ListFilter;

use crate::filter::ItemFilter;
use drover::{InsertResult, NewItem};
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use super::idempotency::{self, Answer};
use super::parse;
use super::views::*;
use crate::AppState;
use crate::auth::{ApiPrincipal, Role};
use crate::problem::{ApiResult, Problem};

/// The route single-item markers are scoped by.
const ENQUEUE_ONE_ROUTE: &str = "POST /v1/items";

/// The most items one batch request may carry.
pub const BATCH_MAX: usize = 10_000;
/// A page's size unless `limit` says.
pub const PAGE_DEFAULT: u32 = 50;
/// The largest page.
pub const PAGE_MAX: u32 = 500;

/// Builds the item a request asks for, checking the token's grant on the
/// kind; returns it with the queue principal to enqueue it as.
fn build(
    state: &AppState,
    who: &ApiPrincipal,
    req: EnqueueRequest,
    field: &str,
) -> Result<(NewItem, drover::queue::Principal), Problem> {
    let tenant = who
        .tenant_for(req.tenant)
        .map_err(|p| p.field(format!("{field}tenant")))?;
    drover::item::validate_kind(&req.kind)
        .map_err(|e| Problem::from(e).field(format!("{field}kind")))?;
    if !who.may_enqueue(&req.kind) {
        return Err(
            Problem::forbidden(format!("the token may not enqueue kind {:?}", req.kind))
                .field(format!("{field}kind")),
        );
    }
    let permission = state.queue.kind_permission(&req.kind);
    let principal = who.queue_principal(tenant, Some(&permission));
    let mut item = NewItem::new(req.kind, req.payload).with_tenant(tenant);
    if let Some(l) = req.lane {
        item = item.with_lane(l);
    }
    if let Some(g) = req.group {
        item = item.with_group(g);
    }
    if let Some(p) = req.priority {
        item = item.with_priority(p);
    }
    if let Some(n) = req.max_attempts {
        item = item.with_max_attempts(n);
    }
    if let Some(t) = req.run_at {
        item = item.with_available_at(t);
    }
    if let Some(k) = req.key {
        item = item.with_key(k);
    }
    item.unique_while_active = req.unique_while_active;
    if let Some(id) = req.id {
        item = item.with_id(id);
    }
    item.after = req.after;
    if let Some(p) = req.after_policy {
        item = item.with_after_policy(p.into());
    }
    item.batch = req.batch;
    Ok((item, principal))
}

/// Enqueue one item.
#[utoipa::path(post, path = "/v1/items", tag = "items",
    request_body = EnqueueRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes a retry of this request safe (IETF httpapi draft)")),
    responses(
        (status = 201, description = "inserted", body = EnqueueResponse),
        (status = 200, description = "an item with this id or key exists: nothing changed", body = EnqueueResponse),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "the token may not enqueue this kind or tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "same Idempotency-Key in flight, or the id belongs to another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Idempotency-Key reused with another body", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn enqueue_one(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let prepared = (|| {
        let key = idempotency::key_of(&headers)?;
        let req: EnqueueRequest = parse::json(&body)?;
        let (item, principal) = build(&state, &who, req, "")?;
        Ok::<_, Problem>((key, item, principal))
    })();
    let (key, item, principal) = match prepared {
        Ok(p) => p,
        Err(p) => return p.into_response(),
    };
    let tenant = item.tenant_id;
    let known = state.queue.kind_registered(&item.kind);
    if state.gather.enabled() {
        let claim =
            key.map(|k| idempotency::claim_of(k, tenant, who.token_id, ENQUEUE_ONE_ROUTE, &body));
        return state.gather.submit(claim, principal, item, known).await;
    }
    idempotency::once(
        &state,
        key,
        tenant,
        who.token_id,
        ENQUEUE_ONE_ROUTE,
        &body,
        || async {
            super::gather::enqueue_answer(known, &state.queue.enqueue_item(&principal, item).await)
        },
    )
    .await
}

/// Enqueue a batch in one statement: every item is checked first, and one
/// bad item refuses the whole batch (the problem names it).
#[utoipa::path(post, path = "/v1/items/batch", tag = "items",
    request_body = BatchRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes a retry of this request safe")),
    responses(
        (status = 201, description = "written (see each row's result)", body = BatchResponse),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "the token may not enqueue one of the kinds", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "same Idempotency-Key in flight", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Idempotency-Key reused with another body", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn enqueue_batch(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let prepared = (|| {
        let key = idempotency::key_of(&headers)?;
        let req: BatchRequest = parse::json(&body)?;
        if req.items.is_empty() || req.items.len() > BATCH_MAX {
            return Err(Problem::invalid(
                "items",
                format!("must hold 1 to {BATCH_MAX} items"),
            ));
        }
        let tenant = who.tenant_for(req.items[0].tenant)?;
        let mut items = Vec::with_capacity(req.items.len());
        for (i, r) in req.items.into_iter().enumerate() {
            let prefix = format!("items[{i}].");
            let (item, principal) = build(&state, &who, r, &prefix)?;
            // The queue checks every item again when it writes the batch;
            // checked here first, a problem names the item by its index.
            item.validate(state.queue.config().max_payload_bytes)
                .map_err(|e| super::gather::item_problem(&e, &prefix))?;
            if item.tenant_id != tenant {
                return Err(Problem::invalid(
                    format!("items[{i}].tenant"),
                    "every item of a batch must be of one tenant",
                ));
            }
            items.push((item, principal));
        }
        Ok::<_, Problem>((key, tenant, items))
    })();
    let (key, tenant, items) = match prepared {
        Ok(p) => p,
        Err(p) => return p.into_response(),
    };
    idempotency::once(
        &state,
        key,
        tenant,
        who.token_id,
        "POST /v1/items/batch",
        &body,
        || async {
            // One principal for the batch: the union of the kinds' permissions.
            let mut principal = items[0].1.clone();
            for (_, p) in &items[1..] {
                principal.permissions.extend(p.permissions.iter().cloned());
            }
            let ids: Vec<Uuid> = items.iter().map(|(i, _)| i.id).collect();
            let batch: Vec<NewItem> = items.into_iter().map(|(i, _)| i).collect();
            match state.queue.enqueue_many(&principal, batch).await {
                Ok(results) => {
                    let inserted = results
                        .iter()
                        .filter(|r| **r == InsertResult::Inserted)
                        .count();
                    Answer::json(
                        StatusCode::CREATED,
                        &BatchResponse {
                            inserted,
                            results: ids
                                .into_iter()
                                .zip(results)
                                .map(|(id, r)| BatchRow {
                                    id,
                                    result: result_name(r).to_owned(),
                                })
                                .collect(),
                        },
                    )
                }
                Err(e) => Answer::from(Problem::from(e)),
            }
        },
    )
    .await
}

/// The filters of a listing.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `pending`, `claimed`, `done`, `failed` or `cancelled`.
    #[param(value_type = Option<super::contract::ItemStatus>)]
    pub status: Option<String>,
    /// The lane.
    #[param(pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub lane: Option<String>,
    /// The kind.
    #[param(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub kind: Option<String>,
    /// The flow-control group.
    #[param(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub group: Option<String>,
    /// The tenant (an unscoped token only; omitted: every tenant).
    pub tenant: Option<Uuid>,
    /// The item's idempotency key.
    pub key: Option<String>,
    /// Created at or after (RFC 3339).
    pub created_after: Option<DateTime<Utc>>,
    /// Created before (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// Text in the last error (case-insensitive).
    pub error: Option<String>,
    /// The `next_cursor` of the previous page.
    #[param(
        pattern = "^-?[0-9]{1,18}_([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$"
    )]
    pub cursor: Option<String>,
    /// Page size (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

impl ListQuery {
    /// The store filter this query asks for, as `who` may see it.
    pub(crate) fn filter(&self, who: &ApiPrincipal, limit: u32) -> Result<ListFilter, Problem> {
        let tenant_id = match who.tenant {
            Some(_) => Some(who.tenant_for(self.tenant)?),
            None => self.tenant,
        };
        if let Some(l) = &self.lane {
            drover::item::validate_lane(l).map_err(|e| Problem::from(e).field("lane"))?;
        }
        if let Some(k) = &self.kind {
            drover::item::validate_kind(k).map_err(|e| Problem::from(e).field("kind"))?;
        }
        if let Some(g) = &self.group {
            drover::item::validate_group(g).map_err(|e| Problem::from(e).field("group"))?;
        }
        let filter = ItemFilter {
            status: self
                .status
                .as_deref()
                .map(|s| parse::status("status", s))
                .transpose()?,
            lane: self.lane.clone(),
            kind: self.kind.clone(),
            group: self.group.clone(),
            key: self.key.clone(),
            created_after: self.created_after,
            created_before: self.created_before,
            error: self.error.clone(),
            after: self.cursor.as_deref().map(parse::cursor).transpose()?,
        };
        Ok(filter.list_filter(tenant_id, limit))
    }
}

/// List items, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/items", tag = "items", params(ListQuery),
    responses(
        (status = 200, description = "a page", body = ItemPage),
        (status = 400, description = "invalid filter", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_items(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    RawQuery(raw): RawQuery,
) -> ApiResult<axum::Json<ItemPage>> {
    let q: ListQuery = parse::query(raw.as_deref())?;
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(Problem::invalid(
            "limit",
            format!("must be 1 to {PAGE_MAX}"),
        ));
    }
    // One more than the page tells whether another page follows.
    let filter = q.filter(&who, limit + 1)?;
    let mut items = state.queue.list(&filter).await?;
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next_cursor = if more {
        items.last().map(|i| parse::cursor_text(i.created_at, i.id))
    } else {
        None
    };
    Ok(axum::Json(ItemPage {
        items: items.into_iter().map(ItemView::from).collect(),
        next_cursor,
    }))
}

/// Which tenant a one-item route addresses.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TenantQuery {
    /// The item's tenant (default the token's, else the nil tenant).
    pub tenant: Option<Uuid>,
}

/// How to read one item: its tenant, and how long to wait for it to be
/// final.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ItemQuery {
    /// The item's tenant (default the token's, else the nil tenant).
    pub tenant: Option<Uuid>,
    /// Wait up to this long for the item to be final (done, failed or
    /// cancelled) before answering: whole seconds, `30` or `30s`, at most
    /// 60. The answer comes as soon as the item is final, or with the item
    /// as it stands when the wait is over (check `status`). Default: answer
    /// at once.
    #[param(pattern = "^[0-9]{1,2}s?$", example = "30s")]
    pub wait: Option<String>,
}

/// The long-poll bound `wait` asks for.
fn wait_bound(wait: Option<&str>) -> Result<Option<std::time::Duration>, Problem> {
    let Some(text) = wait else { return Ok(None) };
    let secs: u64 = text
        .strip_suffix('s')
        .unwrap_or(text)
        .parse()
        .map_err(|_| Problem::invalid("wait", "must be whole seconds (30 or 30s)"))?;
    let max = drover::queue::MAX_WAIT.as_secs();
    if secs > max {
        return Err(Problem::invalid(
            "wait",
            format!("is at most {max} seconds"),
        ));
    }
    Ok(Some(std::time::Duration::from_secs(secs)))
}

fn item_id(text: &str) -> Result<Uuid, Problem> {
    Uuid::parse_str(text).map_err(|_| Problem::invalid("id", "is not a UUID"))
}

/// One item with its attempts, result, progress and audit history; with
/// `wait`, a bounded long-poll that answers when the item is final.
#[utoipa::path(get, path = "/v1/items/{id}", tag = "items",
    params(("id" = Uuid, Path, description = "the item's id"), ItemQuery),
    responses(
        (status = 200, description = "the item", body = ItemDetail),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such item for this tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn get_item(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<axum::Json<ItemDetail>> {
    let id = item_id(&id)?;
    let q: ItemQuery = parse::query(raw.as_deref())?;
    let bound = wait_bound(q.wait.as_deref())?;
    let tenant = who.tenant_for(q.tenant)?;
    let item = match bound {
        Some(b) => state.queue.wait_final(tenant, id, b).await?,
        None => state.queue.get(tenant, id).await?,
    };
    let audit = state.queue.audit(tenant, id).await?;
    let runs = state.queue.runs(tenant, id).await?;
    let links = state.queue.links(tenant, id).await?;
    let waiting = if item.status == drover::Status::Pending {
        state.queue.why_waiting(&item).await?
    } else {
        Vec::new()
    };
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(axum::Json(ItemDetail {
        waiting: waiting
            .into_iter()
            .map(|w| super::views::WaitView::of(w, who.tenant))
            .collect(),
        attempts: AttemptsView {
            spent: item.attempts,
            budget: item.max_attempts,
            claims: item.claim_seq,
            last_error: item.last_error.clone(),
            claimed_by: item.claimed_by.clone(),
        },
        item: item.into(),
        audit: audit
            .into_iter()
            .map(|a| AuditView {
                action: a.action,
                actor_label: actors.name(a.actor),
                actor: a.actor,
                detail: a.detail,
                at: a.at,
            })
            .collect(),
        runs: runs.into_iter().map(Into::into).collect(),
        links: links.into(),
    }))
}

async fn operate(
    state: AppState,
    who: ApiPrincipal,
    id: String,
    raw: Option<String>,
    headers: HeaderMap,
    retry: bool,
) -> Response {
    let prepared = (|| {
        who.require(Role::Operator)?;
        let key = idempotency::key_of(&headers)?;
        let id = item_id(&id)?;
        let q: TenantQuery = parse::query(raw.as_deref())?;
        let tenant = who.tenant_for(q.tenant)?;
        Ok::<_, Problem>((key, id, tenant))
    })();
    let (key, id, tenant) = match prepared {
        Ok(p) => p,
        Err(p) => return p.into_response(),
    };
    let route = if retry {
        "POST /v1/items/{id}/retry"
    } else {
        "POST /v1/items/{id}/cancel"
    };
    // The request is its id (the body is not read): as a JSON string, so
    // the fingerprint is of JSON like every other route's.
    let fingerprint = serde_json::Value::String(id.to_string())
        .to_string()
        .into_bytes();
    idempotency::once(
        &state,
        key,
        tenant,
        who.token_id,
        route,
        &fingerprint,
        || async {
            let principal = who.queue_principal(tenant, None);
            let done = if retry {
                state.queue.retry(&principal, tenant, id).await
            } else {
                state.queue.cancel(&principal, tenant, id).await
            };
            match done {
                Ok(item) => Answer::json(StatusCode::OK, &ItemView::from(item)),
                Err(e) => Answer::from(Problem::from(e)),
            }
        },
    )
    .await
}

/// Retry a done, failed or cancelled item now with a fresh budget
/// (operator; audited with the token as actor).
#[utoipa::path(post, path = "/v1/items/{id}/retry", tag = "items",
    params(("id" = Uuid, Path, description = "the item's id"), TenantQuery,
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry of this request safe")),
    responses(
        (status = 200, description = "pending again", body = ItemView),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such item", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "pending or claimed", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Idempotency-Key reused", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn retry_item(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Response {
    operate(state, who, id, raw, headers, true).await
}

/// Cancel a pending or claimed item (operator; audited).
#[utoipa::path(post, path = "/v1/items/{id}/cancel", tag = "items",
    params(("id" = Uuid, Path, description = "the item's id"), TenantQuery,
        ("Idempotency-Key" = Option<String>, Header, description = "makes a retry of this request safe")),
    responses(
        (status = 200, description = "cancelled", body = ItemView),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such item", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already final", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Idempotency-Key reused", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn cancel_item(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Response {
    operate(state, who, id, raw, headers, false).await
}
