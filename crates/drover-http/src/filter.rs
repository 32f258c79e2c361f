//! The item filter, written once for both fronts: the JSON API's
//! `/v1/items` listing and bulk operations, and the dashboard's item and
//! dead-letter lists. Each front reads its own query shape (typed
//! parameters; a form's strings) into an [`ItemFilter`] and turns it into
//! the queue's [`ListFilter`] here; the cursor and status words are read
//! here for both.
//!
//! Invariant: the tenant is never read from the query here: each front
//! decides it from its principal (a scoped token or session sees only its
//! own tenant) and hands it to [`ItemFilter::list_filter`].

use chrono::{DateTime, Utc};
use drover::Status;
use drover::store::{ListCursor, ListFilter};
use uuid::Uuid;

/// An item listing's filters, read and checked, but not yet scoped.
#[derive(Debug, Default, Clone)]
pub(crate) struct ItemFilter {
    /// Only items of this status.
    pub status: Option<Status>,
    /// Only this lane.
    pub lane: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this flow-control group.
    pub group: Option<String>,
    /// Only the item with this idempotency key.
    pub key: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before.
    pub created_before: Option<DateTime<Utc>>,
    /// Text in the last error (empty: no such filter).
    pub error: Option<String>,
    /// The page after this cursor.
    pub after: Option<ListCursor>,
}

impl ItemFilter {
    /// The queue's filter for this one, as seen by a principal confined to
    /// `tenant_id` (or every tenant for `None`), `limit` items at most.
    pub(crate) fn list_filter(self, tenant_id: Option<Uuid>, limit: u32) -> ListFilter {
        ListFilter {
            tenant_id,
            status: self.status,
            lane: self.lane,
            kind: self.kind,
            group: self.group,
            key: self.key,
            created_after: self.created_after,
            created_before: self.created_before,
            error_contains: self.error.filter(|e| !e.is_empty()),
            after: self.after,
            limit,
        }
    }
}

/// A status by name (`pending`, `claimed`, `done`, `failed`,
/// `cancelled`); `None` for another word.
pub(crate) fn status(s: &str) -> Option<Status> {
    s.parse::<Status>().ok()
}

/// The opaque cursor of a page: the last item's creation time in
/// microseconds and its id.
pub(crate) fn cursor_text(created_at: DateTime<Utc>, id: Uuid) -> String {
    format!("{}_{}", created_at.timestamp_micros(), id.simple())
}

/// Reads a cursor `<microseconds>_<id>` (as [`cursor_text`] makes, the id
/// in any form a UUID is written in); `None` when malformed.
pub(crate) fn cursor(text: &str) -> Option<ListCursor> {
    let (us, id) = text.split_once('_')?;
    let us: i64 = us.parse().ok()?;
    let created_at = DateTime::<Utc>::from_timestamp_micros(us)?;
    let id = Uuid::parse_str(id).ok()?;
    Some(ListCursor { created_at, id })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_cursor_reads_back_in_either_uuid_form() {
        let id = Uuid::now_v7();
        let at = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let c = cursor(&cursor_text(at, id)).unwrap();
        assert_eq!((c.created_at, c.id), (at, id));
        let hyphenated = format!("{}_{}", at.timestamp_micros(), id);
        assert_eq!(cursor(&hyphenated).unwrap().id, id);
        assert!(cursor("nonsense").is_none());
        assert!(cursor("12_nope").is_none());
    }
}
