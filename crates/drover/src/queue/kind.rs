//! Kinds and principals: what a producer enqueues and who it is.
//!
//! A kind is a Rust type: its payload, its name, its lane, its attempt
//! budget and retry policy, and the permission a producer needs to enqueue
//! it. A principal is the producer: an actor in a tenant holding a set of
//! permissions. Enqueueing a kind whose permission the principal lacks is
//! refused with `Forbidden` before anything is written.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::item::{DEFAULT_LANE, DEFAULT_MAX_ATTEMPTS};
use crate::rules::RetryPolicy;

/// The permission a kind requires when it names none.
pub const DEFAULT_PERMISSION: &str = "drover.enqueue";
/// The permission an operator needs to cancel or retry items
/// ([`Queue::cancel`](crate::queue::Queue::cancel),
/// [`Queue::retry`](crate::queue::Queue::retry)).
pub const OPERATE_PERMISSION: &str = "drover.operate";

/// True when holding `granted` allows what `required` names: the same
/// permission, `"*"` (every permission), or a wildcard `"a.b.*"` covering
/// every permission under `a.b.` (`"billing.*"` covers `"billing.refund"`
/// and `"billing.refund.partial"`, not `"billing"` itself). The one rule for
/// both a principal's enqueue check and a handler's `REQUIRES` check.
pub fn permission_covers(granted: &str, required: &str) -> bool {
    if granted == "*" || granted == required {
        return true;
    }
    match granted.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('.') => {
            required.len() > prefix.len() && required.starts_with(prefix)
        }
        _ => false,
    }
}

/// A kind of work: the payload type and the rules for items of it.
///
/// ```
/// use drover::queue::Kind;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendWelcome { user_id: u64 }
///
/// impl Kind for SendWelcome {
///     const NAME: &'static str = "send_welcome";
///     const PERMISSION: &'static str = "mail.send";
/// }
/// ```
pub trait Kind: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind's name (`[a-z0-9_.:-]{1,128}`); names the handler.
    const NAME: &'static str;
    /// The lane items of this kind wait in unless the producer says otherwise.
    const LANE: &'static str = DEFAULT_LANE;
    /// The attempt budget.
    const MAX_ATTEMPTS: i32 = DEFAULT_MAX_ATTEMPTS;
    /// The permission a producer needs to enqueue it. It must cover every
    /// permission the kind's handler declares in `REQUIRES`.
    const PERMISSION: &'static str = DEFAULT_PERMISSION;
    /// At most this many items of the kind claimed at once across the
    /// fleet, declared in code (`drover limits set --kind` overrides it).
    /// `None` (the default): no kind limit.
    const CONCURRENCY: Option<u32> = None;
    /// At most this many items of each group of the kind claimed at once
    /// (see [`Kind::group`]), declared in code (`drover limits set --kind
    /// --per-group` overrides it). `None` (the default): no per-group limit.
    const GROUP_CONCURRENCY: Option<u32> = None;
    /// Each group of the kind runs one item at a time in enqueue order
    /// (`drover limits set --kind --per-group --concurrency 1 --ordered`):
    /// implies a per-group limit of 1, so `GROUP_CONCURRENCY` must be
    /// `None` or `Some(1)`.
    const ORDERED: bool = false;
    /// At most this rate of starts of the kind across the fleet (a
    /// generic cell rate on the database clock: `Rate::per(10,
    /// Duration::from_secs(1)).with_burst(20)`), declared in code
    /// (`drover limits set --kind K --rate 10/1s --burst 20` overrides it).
    /// `None` (the default): no rate.
    const RATE: Option<crate::store::rates::Rate> = None;
    /// At most this rate of starts in each group of the kind (see
    /// [`Kind::group`]), declared in code (`drover limits set --kind K
    /// --per-group --rate ..` overrides it). `None` (the default): none.
    const GROUP_RATE: Option<crate::store::rates::Rate> = None;
    /// What an ordered group does past a dead-lettered item: go on with
    /// the next ([`OnDeadLetter::Continue`](crate::store::limits::OnDeadLetter),
    /// the default) or hold the group until an operator retries or cancels
    /// it.
    const ON_DEAD_LETTER: crate::store::limits::OnDeadLetter =
        crate::store::limits::OnDeadLetter::Continue;

    /// The retry policy for failures of this kind; `None` follows the
    /// queue's (see [`QueueConfig::retry`](crate::queue::QueueConfig::retry)).
    fn retry_policy() -> Option<RetryPolicy> {
        None
    }

    /// The flow-control group this job belongs to, derived from its
    /// payload (`Some(format!("customer:{}", self.customer))`): per-group
    /// limits and ordered groups count items by kind and group. `None`
    /// (the default) puts it in no group; a producer's `.group(..)`
    /// overrides it. Must be `[a-z0-9_.:-]{1,128}`.
    fn group(&self) -> Option<String> {
        None
    }
}

/// Who is enqueueing: an actor in a tenant, with permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The actor stamped as `created_by`.
    pub actor: Uuid,
    /// The tenant that will own the items.
    pub tenant: Uuid,
    /// The permissions held; `"*"` holds every permission.
    pub permissions: BTreeSet<String>,
    /// The request that causes the enqueue, kept on the item.
    pub request_id: Option<String>,
    /// The W3C trace context of that request, kept on the item.
    pub traceparent: Option<String>,
}

impl Principal {
    /// The system: nil actor, nil tenant, every permission. What the CLI and
    /// single-tenant services enqueue as.
    pub fn system() -> Self {
        Principal {
            actor: Uuid::nil(),
            tenant: Uuid::nil(),
            permissions: BTreeSet::from(["*".to_owned()]),
            request_id: None,
            traceparent: None,
        }
    }

    /// An actor in a tenant holding `permissions`.
    pub fn new<I, S>(actor: Uuid, tenant: Uuid, permissions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Principal {
            actor,
            tenant,
            permissions: permissions.into_iter().map(Into::into).collect(),
            request_id: None,
            traceparent: None,
        }
    }

    /// Sets the causing request id.
    pub fn with_request(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// Sets the causing trace context.
    pub fn with_traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// True when the principal holds a permission covering `permission`
    /// (see [`permission_covers`]).
    pub fn holds(&self, permission: &str) -> bool {
        self.permissions.contains("*")
            || self.permissions.contains(permission)
            || self
                .permissions
                .iter()
                .any(|g| permission_covers(g, permission))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_covers_itself_star_and_wildcards_below_it() {
        assert!(permission_covers("mail.send", "mail.send"));
        assert!(permission_covers("*", "billing.refund"));
        assert!(permission_covers("billing.*", "billing.refund"));
        assert!(permission_covers("billing.*", "billing.refund.partial"));
        assert!(!permission_covers("billing.*", "billing"));
        assert!(!permission_covers("billing.*", "billingx.refund"));
        assert!(!permission_covers("mail.send", "billing.refund"));
        assert!(!permission_covers("billing", "billing.refund"));
        assert!(!permission_covers("billing*", "billingx"));
    }

    #[test]
    fn principal_holds_through_a_wildcard() {
        let p = Principal::new(Uuid::nil(), Uuid::nil(), ["billing.*"]);
        assert!(p.holds("billing.refund"));
        assert!(!p.holds("mail.send"));
    }
}
