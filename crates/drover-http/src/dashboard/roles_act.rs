//! The role pages' actions (POST), each behind the CSRF check and the
//! operator gate ([`super::actions::gate`], [`super::actions::operator_gate`]),
//! each logged with the token as actor:
//! - trigger a schedule now: one item of the schedule, created by the
//!   token (its `created_by`), for an unscoped token, of a schedule this
//!   server declares;
//! - cancel, resume or signal an orchestration, as the token's operator
//!   principal in the orchestration's tenant (the queue records the step
//!   in the orchestration's history; a signal is kept in its signals).

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::DashState;
use super::actions::{back_to, field, gate, operator_gate};

/// Triggers the schedule `name` now (an item outside its ticks).
pub(super) async fn schedules_act(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Err(r) = operator_gate(&st, &v) {
        return *r;
    }
    let p = &v.session.principal;
    if p.tenant.is_some() {
        return (StatusCode::FORBIDDEN, "schedules are installation-wide").into_response();
    }
    let back = format!("{}/schedules", st.config.base());
    if field(&form, "action") != Some("trigger") {
        return back_to(&st, Some(&back), "choose trigger");
    }
    let name = field(&form, "name").unwrap_or("");
    let Some(schedule) = st.config.schedules.get(name) else {
        return back_to(
            &st,
            Some(&back),
            &format!(
                "schedule {name:?} is not declared by this server: \
                 run `<service> schedules trigger {name}` from the binary that declares it"
            ),
        );
    };
    let item = schedule.manual_item();
    let permission = st.app.queue.kind_permission(&item.kind);
    let qp = p.queue_principal(item.tenant_id, Some(&permission));
    match st.app.queue.enqueue_item(&qp, item).await {
        Ok(out) => {
            tracing::info!(token = %p.token_id, schedule = name, item = %out.item.id,
                "schedule triggered from the dashboard");
            back_to(
                &st,
                Some(&back),
                &format!("triggered {name}: item {}", out.item.id),
            )
        }
        Err(e) => back_to(&st, Some(&back), &format!("trigger {name} failed: {e}")),
    }
}

/// Cancels, resumes or signals one orchestration (`orchestration` =
/// `tenant/id`).
pub(super) async fn orchestrations_act(
    State(st): State<DashState>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let v = match gate(&st, &headers, &form).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Err(r) = operator_gate(&st, &v) {
        return *r;
    }
    let back = field(&form, "back");
    let p = &v.session.principal;
    let parsed = field(&form, "orchestration")
        .and_then(|s| s.split_once('/'))
        .and_then(|(t, i)| Some((t.parse::<Uuid>().ok()?, i.parse::<Uuid>().ok()?)));
    let Some((asked, id)) = parsed else {
        return back_to(&st, back, "no orchestration named");
    };
    let Ok(tenant) = p.tenant_for(Some(asked)) else {
        return back_to(&st, back, &format!("no orchestration {id}"));
    };
    let qp = p.queue_principal(tenant, None);
    let q = &st.app.queue;
    let action = field(&form, "action").unwrap_or("");
    let msg = match action {
        "cancel" => q
            .cancel_orchestration(&qp, tenant, id)
            .await
            .map(|o| format!("cancel requested: {} now {}", o.id, o.status.as_str())),
        "resume" => q
            .resume_orchestration(&qp, tenant, id)
            .await
            .map(|o| format!("resumed: {} now {}", o.id, o.status.as_str())),
        "signal" => {
            let name = field(&form, "name").unwrap_or("").trim();
            let raw = field(&form, "payload").unwrap_or("").trim();
            let payload = if raw.is_empty() {
                Ok(serde_json::Value::Null)
            } else {
                serde_json::from_str(raw)
            };
            let Ok(payload) = payload else {
                return back_to(&st, back, "the payload is not JSON");
            };
            let key = field(&form, "key").map(str::trim).filter(|k| !k.is_empty());
            q.signal(&qp, tenant, id, name, payload, key)
                .await
                .map(|out| format!("signal {name} sent: {out:?}").to_lowercase())
        }
        _ => return back_to(&st, back, "choose cancel, resume or signal"),
    };
    match msg {
        Ok(m) => {
            tracing::info!(token = %p.token_id, orchestration = %id, action,
                "orchestration action from the dashboard");
            back_to(&st, back, &m)
        }
        Err(e) => back_to(&st, back, &format!("{action} refused: {e}")),
    }
}
