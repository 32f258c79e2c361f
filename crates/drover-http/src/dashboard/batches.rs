//! The batches page (docs/dependencies.md): the session's tenant's
//! batches, newest first, with their progress (members final of total,
//! per final status) and where each stands (open, sealed, finished).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::DashState;
use super::pages::{TablePage, nav, note_page, render, time, viewer};

/// The most batches the page lists.
const SHOWN: u32 = 100;

/// Batches: the newest, with their progress.
pub(super) async fn batches(State(st): State<DashState>, headers: HeaderMap) -> Response {
    let v = match viewer(&st, &headers).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let tenant = v.session.principal.tenant.unwrap_or_default();
    let rows = match st.app.queue.batches(tenant, SHOWN).await {
        Ok(r) => r,
        Err(e) => {
            return note_page(
                &st,
                &v,
                "Batches",
                e.to_string(),
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    render(
        &TablePage {
            nav: nav(&st, &v, "Batches", None),
            note: rows.is_empty().then(|| "no batches".to_owned()),
            header: vec![
                "id",
                "state",
                "progress",
                "done",
                "failed",
                "cancelled",
                "callback",
                "created",
            ],
            rows: rows
                .into_iter()
                .map(|b| {
                    let finished = b.total - b.open();
                    vec![
                        b.id.to_string(),
                        b.state().to_owned(),
                        format!("{finished}/{}", b.total),
                        b.counts.done.to_string(),
                        b.counts.failed.to_string(),
                        b.counts.cancelled.to_string(),
                        format!("{} ({})", b.callback_kind, b.when.as_str()),
                        time(b.created_at),
                    ]
                })
                .collect(),
        },
        StatusCode::OK,
    )
}
