//! The concurrency limits as the lanes page shows them
//! (docs/flow-control.md): each limit in force with its use, a lane's
//! beside its lane and the kind and per-group ones in a table of their
//! own. Setting and clearing one is `actions::limits_act`.
//!
//! The rule is the HTTP limits routes' (`api/limits.rs`): a limit counts
//! every tenant's items, so only a session of a token scoped to no tenant
//! sees or changes them (a tenant-scoped session gets the scoped page
//! before any limit is read).

use std::collections::BTreeMap;

use drover::store::limits::{LimitScope, LimitUsage};

use crate::actors::Actors;

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
    /// Who set it: the operator's token label, or `system` for the code's.
    pub by: String,
    /// For an ordered group: `ordered, on dead letter continue|hold`;
    /// empty otherwise.
    pub order: String,
}

impl LimitRow {
    /// Whether an operator set it (so it can be cleared here).
    pub fn by_operator(&self) -> bool {
        self.source == "operator"
    }
}

impl LimitRow {
    /// `u` as the page shows it, its setter named.
    fn of(u: LimitUsage, actors: &Actors) -> Self {
        LimitRow {
            by: actors.name(u.setting.set_by),
            scope: u.setting.scope.kind_name().to_owned(),
            name: u.setting.scope.name().to_owned(),
            concurrency: u.setting.concurrency,
            in_use: u.in_use,
            waiting: u.waiting,
            source: u.setting.source.as_str().to_owned(),
            order: if u.setting.ordered {
                format!(
                    "ordered, on dead letter {}",
                    u.setting.on_dead_letter.as_str()
                )
            } else {
                String::new()
            },
        }
    }
}

/// The limits in force split for the page: the lane limits by lane, and
/// the kind and per-group limits in the order the queue lists them.
pub(super) fn split(
    usage: Vec<LimitUsage>,
    actors: &Actors,
) -> (BTreeMap<String, LimitRow>, Vec<LimitRow>) {
    let mut lanes = BTreeMap::new();
    let mut others = Vec::new();
    for u in usage {
        match u.setting.scope {
            LimitScope::Lane(ref lane) => {
                lanes.insert(lane.clone(), LimitRow::of(u, actors));
            }
            LimitScope::Kind(_) | LimitScope::KindPerGroup(_) => {
                others.push(LimitRow::of(u, actors))
            }
        }
    }
    (lanes, others)
}
