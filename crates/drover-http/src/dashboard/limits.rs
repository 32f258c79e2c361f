//! The concurrency limits on the lanes page (docs/flow-control.md): each
//! limit in force with its use, a lane's beside its lane and the kind and
//! per-group ones in a table of their own; and an operator's setting and
//! clearing of one.
//!
//! The rule is the HTTP limits routes' (`api/limits.rs`): a limit counts
//! every tenant's items, so only a session of a token scoped to no tenant
//! sees or changes them (a tenant-scoped session gets the scoped page
//! before any limit is read); changing one needs the operator role, a
//! server not in read-only mode, and the CSRF check like every POST here.

use std::collections::BTreeMap;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use drover::store::limits::{LimitScope, LimitUsage};
use uuid::Uuid;

use super::DashState;
use super::actions::{back_to, field, gate, operator_gate};

/// One limit in force as the lanes page shows it.
pub(super) struct LimitRow {
    /// `lane`, `kind` or `group` (each group of the kind separately).
    pub scope: String,
    /// The lane or kind.
    pub name: String,
    /// At most this many claimed at once.
    pub concurrency: u32,
    /// Slots held now (a per-group limit: its fullest group).
    pub in_use: u64,
    /// Available pending items it applies to.
    pub waiting: u64,
    /// `code` or `operator`.
    pub source: String,
}

impl LimitRow {
    /// Whether an operator set it (so it can be cleared here).
    pub fn by_operator(&self) -> bool {
        self.source == "operator"
    }
}

impl From<LimitUsage> for LimitRow {
    fn from(u: LimitUsage) -> Self {
        LimitRow {
            scope: u.setting.scope.kind_name().to_owned(),
            name: u.setting.scope.name().to_owned(),
            concurrency: u.setting.concurrency,
            in_use: u.in_use,
            waiting: u.waiting,
            source: u.setting.source.as_str().to_owned(),
        }
    }
}

/// The limits in force split for the page: the lane limits by lane, and
/// the kind and per-group limits in the order the queue lists them.
pub(super) fn split(usage: Vec<LimitUsage>) -> (BTreeMap<String, LimitRow>, Vec<LimitRow>) {
    let mut lanes = BTreeMap::new();
    let mut others = Vec::new();
    for u in usage {
        match u.setting.scope {
            LimitScope::Lane(ref lane) => {
                lanes.insert(lane.clone(), LimitRow::from(u));
            }
            LimitScope::Kind(_) | LimitScope::KindPerGroup(_) => others.push(LimitRow::from(u)),
        }
    }
    (lanes, others)
}

/// Sets (`action=set`, with `scope`, `name`, `concurrency`) or clears
/// (`action=clear`, with `scope`, `name`) an operator's limit, then back
/// to the lanes page with what happened.
pub(super) async fn limits_act(
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
    if v.session.principal.tenant.is_some() {
        return (
            StatusCode::FORBIDDEN,
            "a limit counts every tenant's items: use a token not scoped to a tenant",
        )
            .into_response();
    }
    let back = format!("{}/lanes", st.config.base());
    let back = Some(back.as_str());
    let scope = LimitScope::from_parts(
        field(&form, "scope").unwrap_or(""),
        field(&form, "name").unwrap_or("").trim(),
    )
    .and_then(|s| s.validate().map(|()| s));
    let scope = match scope {
        Ok(s) => s,
        Err(e) => return back_to(&st, back, &e.to_string()),
    };
    let principal = v.session.principal.queue_principal(Uuid::nil(), None);
    let msg = match field(&form, "action") {
        Some("set") => {
            let Ok(n) = field(&form, "concurrency")
                .unwrap_or("")
                .trim()
                .parse::<u32>()
            else {
                return back_to(&st, back, "concurrency: a whole number from 1 to 100000");
            };
            match st.app.queue.limit_set(&principal, &scope, n).await {
                Ok(s) => format!("limit on {} set to {}", s.scope, s.concurrency),
                Err(e) => e.to_string(),
            }
        }
        Some("clear") => match st.app.queue.limit_clear(&principal, &scope).await {
            Ok(true) => format!("operator limit on {scope} cleared"),
            Ok(false) => format!("no operator limit on {scope} to clear"),
            Err(e) => e.to_string(),
        },
        _ => "choose set or clear".to_owned(),
    };
    back_to(&st, back, &msg)
}
