//! The dead letter by group: its items grouped by kind and by normalised
//! error (digits and UUIDs collapsed, so "order 1234 timed out" and "order
//! 98 timed out" are one group), each with "retry all in this group".
//!
//! Invariants: the groups are read from the newest [`GROUP_SCAN`] dead
//! letters the page's filter matches (the page says so when there are
//! more), at most once per live interval and filter, and again at once
//! after a dashboard action; a group's retry lists the failed items of its kind whose error
//! holds the pattern's longest literal part, keeps those whose normalised
//! error is the group's, and retries them through the API's bulk action
//! ([`crate::bulk::apply`]): each one audited with the token as
//! actor, at most [`GROUP_MAX`] per request.

use std::collections::HashMap;

use axum::Form;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use drover::store::ListFilter;
use drover::{Item, Status};
use uuid::Uuid;

use super::DashState;
use super::actions::{back_to, field, gate, operator_gate};
use super::fmt::{When, when};
use crate::bulk::{self, BulkAction};

/// The most items one "retry all in this group" retries (the API's bulk
/// cap, `BULK_MAX`).
pub(super) const GROUP_MAX: u32 = 10_000;
/// How many of the newest dead letters the groups are read from.
pub(super) const GROUP_SCAN: u32 = 1000;
/// The placeholder of a collapsed UUID.
const ID: &str = "<id>";
/// The placeholder of a collapsed run of digits.
const NUM: &str = "#";

/// An error with its UUIDs and runs of digits collapsed.
pub(super) fn normalise(error: &str) -> String {
    let chars: Vec<char> = error.chars().collect();
    let mut out = String::with_capacity(error.len());
    let mut i = 0;
    while i < chars.len() {
        if let Some(n) = uuid_at(&chars[i..]) {
            out.push_str(ID);
            i += n;
        } else if chars[i].is_ascii_digit() {
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            out.push_str(NUM);
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The length of a UUID (hyphenated, 36 characters, or simple, 32 hex
/// digits not followed by another) at the start of `s`, if one is there.
fn uuid_at(s: &[char]) -> Option<usize> {
    let hex = |c: &char| c.is_ascii_hexdigit();
    if s.len() >= 36 {
        let shaped = s[..36].iter().enumerate().all(|(k, c)| match k {
            8 | 13 | 18 | 23 => *c == '-',
            _ => hex(c),
        });
        if shaped && !s.get(36).is_some_and(|c| c.is_ascii_alphanumeric()) {
            return Some(36);
        }
    }
    if s.len() >= 32
        && s[..32].iter().all(hex)
        && !s.get(32).is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return Some(32);
    }
    None
}

/// The longest stretch of a pattern between placeholders: the text every
/// error of the group holds, used to narrow the listing.
fn longest_literal(pattern: &str) -> String {
    pattern
        .split(ID)
        .flat_map(|p| p.split(NUM))
        .max_by_key(|p| p.chars().count())
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// One group of the dead letter.
pub(super) struct GroupRow {
    pub kind: String,
    pub pattern: String,
    pub count: usize,
    pub newest: When,
    pub sample: Uuid,
    pub sample_tenant: Uuid,
}

/// The groups of `items` (dead letters, newest first), largest first.
pub(super) fn groups(items: &[Item], now: DateTime<Utc>) -> Vec<GroupRow> {
    let mut by: HashMap<(String, String), (usize, &Item)> = HashMap::new();
    for i in items {
        let key = (
            i.kind.clone(),
            normalise(i.last_error.as_deref().unwrap_or("")),
        );
        by.entry(key).or_insert((0, i)).0 += 1;
    }
    let mut out: Vec<GroupRow> = by
        .into_iter()
        .map(|((kind, pattern), (count, newest))| GroupRow {
            kind,
            pattern,
            count,
            newest: when(newest.updated_at, now),
            sample: newest.id,
            sample_tenant: newest.tenant_id,
        })
        .collect();
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.pattern.cmp(&b.pattern))
    });
    out
}

/// The groups of the newest [`GROUP_SCAN`] dead letters `filter` matches,
/// and a note when there are more than that.
pub(super) async fn read_groups(
    st: &DashState,
    filter: &ListFilter,
) -> drover::Result<(Vec<GroupRow>, Option<String>)> {
    let scan = ListFilter {
        status: Some(Status::Failed),
        after: None,
        limit: GROUP_SCAN + 1,
        ..filter.clone()
    };
    // Shared by the viewers of one interval (the live view's cache).
    let items = st.live.dead_scan(&scan).await?;
    let more = items.len() > GROUP_SCAN as usize;
    let shown = &items[..items.len().min(GROUP_SCAN as usize)];
    let note = more.then(|| format!("grouped over the newest {GROUP_SCAN} dead letters"));
    Ok((groups(shown, Utc::now()), note))
}

/// Retries every dead letter of one group (`kind`, `pattern`), at most
/// [`GROUP_MAX`], through the bulk action; back to the dead letter with
/// what it did.
pub(super) async fn retry_group(
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
    let (Some(kind), Some(pattern)) = (field(&form, "kind"), field(&form, "pattern")) else {
        return back_to(&st, back, "choose a group");
    };
    let p = &v.session.principal;
    let literal = longest_literal(pattern);
    let filter = ListFilter {
        tenant_id: p.tenant,
        status: Some(Status::Failed),
        kind: Some(kind.to_owned()),
        error_contains: (!literal.is_empty()).then_some(literal),
        limit: GROUP_MAX * 2,
        ..ListFilter::default()
    };
    let matched = match bulk::actionable(&st.app, &filter, BulkAction::Retry).await {
        Ok(m) => m,
        Err(e) => return back_to(&st, back, &format!("retry stopped: {e}")),
    };
    let mut group: Vec<Item> = matched
        .into_iter()
        .filter(|i| normalise(i.last_error.as_deref().unwrap_or("")) == pattern)
        .collect();
    let more = group.len() > GROUP_MAX as usize;
    group.truncate(GROUP_MAX as usize);
    let applied = bulk::apply(&st.app, p, &group, BulkAction::Retry).await;
    st.live.dead_scan_stale().await;
    match applied {
        Ok((applied, skipped)) => {
            tracing::info!(actor = %p.token_id, kind, pattern, applied, skipped,
                "dashboard retried a dead-letter group");
            let mut msg = format!("retried {applied} of the group");
            if skipped > 0 {
                msg.push_str(&format!(", {skipped} refused or gone"));
            }
            if more {
                msg.push_str(&format!("; more remain (at most {GROUP_MAX} a request)"));
            }
            back_to(&st, back, &msg)
        }
        Err(e) => back_to(&st, back, &format!("retry stopped: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_uuids_collapse() {
        assert_eq!(
            normalise("order 1234 timed out after 30s"),
            "order # timed out after #s"
        );
        assert_eq!(
            normalise("item 0190c6a4-5b1e-7c3d-9e8f-0123456789ab gone"),
            "item <id> gone"
        );
        assert_eq!(normalise("id 0190c6a45b1e7c3d9e8f0123456789ab"), "id <id>");
        assert_eq!(normalise(""), "");
        assert_eq!(
            longest_literal("order # timed out after #s"),
            "timed out after"
        );
    }
}
