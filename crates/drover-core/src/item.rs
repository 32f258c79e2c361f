//! The work item: its fields, its statuses and the validation of what a
//! producer may ask for.
//!
//! Invariants kept here (and again as `CHECK` constraints in every SQL
//! backend): a kind matches `[a-z0-9_.:-]{1,128}`, a lane matches
//! `[a-z0-9_-]{1,64}`, `max_attempts >= 1`, a payload is a JSON value no
//! larger than the configured limit, and a claimed item carries a claim
//! token, a holder and a lease expiry while no other status does.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};

/// The lane an item waits in when the producer names none.
pub const DEFAULT_LANE: &str = "default";
/// The attempt budget an item gets when the producer names none.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 5;
/// The largest payload accepted by default, in bytes of its JSON text.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// The longest `last_error` kept, in bytes; longer messages are cut.
pub const MAX_ERROR_BYTES: usize = 2048;
/// The longest idempotency key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// The longest kind name accepted.
pub const MAX_KIND_LEN: usize = 128;
/// The longest lane name accepted.
pub const MAX_LANE_LEN: usize = 64;
/// The longest group name accepted.
pub const MAX_GROUP_LEN: usize = 128;
/// The largest handler result accepted, in bytes of its JSON text (as a
/// payload's default limit).
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// The largest progress note accepted, in bytes of its JSON text.
pub const MAX_PROGRESS_BYTES: usize = 8 * 1024;

/// Where an item is in its life. See `docs/state-machine.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting to be claimed once `available_at` has passed.
    Pending,
    /// Held by a worker under a lease.
    Claimed,
    /// Completed (final).
    Done,
    /// Dead-lettered: the attempt budget is spent or the failure was fatal (final).
    Failed,
    /// Cancelled by an operator (final).
    Cancelled,
}

impl Status {
    /// Every status, in life order.
    pub const ALL: [Status; 5] = [
        Status::Pending,
        Status::Claimed,
        Status::Done,
        Status::Failed,
        Status::Cancelled,
    ];

    /// The name stored in the database and shown by the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Claimed => "claimed",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// True for `done`, `failed` and `cancelled`: nothing happens to the item
    /// again unless an operator retries it.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Done | Status::Failed | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "status",
                    format!("{s:?} is not one of pending, claimed, done, failed, cancelled"),
                )
            })
    }
}

/// A stored work item, as every backend returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Time-ordered identity (UUID v7 when minted by drover).
    pub id: Uuid,
    /// The owning tenant; the nil UUID in single-tenant use.
    pub tenant_id: Uuid,
    /// What to do; names the handler.
    pub kind: String,
    /// The named queue the item waits in.
    pub lane: String,
    /// The flow-control group it belongs to (per-group limits and ordered
    /// groups count items by kind and group), if any.
    pub group: Option<String>,
    /// The kind's arguments.
    pub payload: serde_json::Value,
    /// Lower runs first among available items.
    pub priority: i16,
    /// Where the item is in its life.
    pub status: Status,
    /// Not claimable before this instant.
    pub available_at: DateTime<Utc>,
    /// Attempts spent (failures, including lease expiries).
    pub attempts: i32,
    /// The attempt budget.
    pub max_attempts: i32,
    /// The worker holding the current claim.
    pub claimed_by: Option<String>,
    /// The first fence: random per claim, required by every write after it.
    pub claim_token: Option<Uuid>,
    /// The second fence: grows with every claim; handed to handlers.
    pub claim_seq: i64,
    /// When the current claim lapses (database clock).
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The last failure's message (bounded length).
    pub last_error: Option<String>,
    /// Unique per tenant while the row exists.
    pub idempotency_key: Option<String>,
    /// The actor that enqueued the item.
    pub created_by: Uuid,
    /// The request that caused the item.
    pub request_id: Option<String>,
    /// W3C trace context of the causing request, to link to.
    pub traceparent: Option<String>,
    /// When the item was constructed.
    pub created_at: DateTime<Utc>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// Who last changed the row (the nil UUID, the system, after the enqueue).
    pub updated_by: Uuid,
    /// What the handler returned, written by the fenced write that completed
    /// the item (`None` before that, or when it returned nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The last progress a handler reported, kept across retries so the next
    /// run can resume from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The key this item holds only while it is pending or claimed
    /// ([`NewItem::unique_while_active`]): no other active item of the same
    /// tenant and kind holds it at the same time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_key: Option<String>,
}

/// What a running handler last reported about how far it got: a number
/// (a percentage, or any count the handler likes), a small JSON note (a
/// checkpoint to resume from), or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Progress {
    /// How far, as a number (0..=100 for a percentage, by convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// A small JSON note (at most [`MAX_PROGRESS_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl Progress {
    /// Checks the note's size and that the number is finite.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `progress`.
    pub fn validate(&self) -> Result<()> {
        if let Some(v) = self.value
            && !v.is_finite()
        {
            return Err(Error::invalid(
                "progress",
                "the value must be a finite number",
            ));
        }
        if self.value.is_none() && self.data.is_none() {
            return Err(Error::invalid("progress", "give a value, a note, or both"));
        }
        if let Some(d) = &self.data {
            validate_json("progress", d, MAX_PROGRESS_BYTES)?;
        }
        Ok(())
    }
}

/// Checks a handler's result against [`MAX_RESULT_BYTES`].
///
/// # Errors
/// [`Error::InvalidInput`] on `result`.
pub fn validate_result(result: &serde_json::Value) -> Result<()> {
    validate_json("result", result, MAX_RESULT_BYTES)
}

/// A new item, as a producer asks for it. Build it with [`NewItem::new`] and
/// the `with_*` methods; [`NewItem::validate`] checks it before any write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewItem {
    /// Identity; minted as UUID v7 when not given.
    pub id: Uuid,
    /// The owning tenant.
    pub tenant_id: Uuid,
    /// What to do.
    pub kind: String,
    /// Where it waits.
    pub lane: String,
    /// Its flow-control group, if any (`[a-z0-9_.:-]{1,128}`).
    pub group: Option<String>,
    /// The arguments.
    pub payload: serde_json::Value,
    /// Lower runs first.
    pub priority: i16,
    /// Not claimable before this; `None` means now.
    pub available_at: Option<DateTime<Utc>>,
    /// The attempt budget.
    pub max_attempts: i32,
    /// Optional deduplication key, unique per tenant.
    pub idempotency_key: Option<String>,
    /// Who enqueues it.
    pub created_by: Uuid,
    /// The causing request.
    pub request_id: Option<String>,
    /// W3C trace context to link to.
    pub traceparent: Option<String>,
    /// When it was constructed.
    pub created_at: DateTime<Utc>,
    /// The idempotency key holds only while the item is pending or claimed:
    /// an enqueue with the same tenant, kind and key is refused (answering
    /// the active item, as a key collision does) only while one is active,
    /// and creates a new item once it is final. The key is then stored as
    /// the item's `active_key`, not its `idempotency_key`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique_while_active: bool,
}

impl NewItem {
    /// A new item of `kind` with `payload` and every other field at its default.
    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> Self {
        NewItem {
            id: Uuid::now_v7(),
            tenant_id: Uuid::nil(),
            kind: kind.into(),
            lane: DEFAULT_LANE.to_owned(),
            group: None,
            payload,
            priority: 0,
            available_at: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            idempotency_key: None,
            created_by: Uuid::nil(),
            request_id: None,
            traceparent: None,
            created_at: Utc::now(),
            unique_while_active: false,
        }
    }

    /// Makes the idempotency key unique only while the item is active
    /// (see [`NewItem::unique_while_active`]).
    pub fn with_unique_while_active(mut self) -> Self {
        self.unique_while_active = true;
        self
    }

    /// The key stored as `idempotency_key`: none when the key holds only
    /// while active.
    pub fn stored_key(&self) -> Option<&str> {
        if self.unique_while_active {
            None
        } else {
            self.idempotency_key.as_deref()
        }
    }

    /// The key stored as `active_key`: the idempotency key when it holds only
    /// while active.
    pub fn active_key(&self) -> Option<&str> {
        if self.unique_while_active {
            self.idempotency_key.as_deref()
        } else {
            None
        }
    }

    /// Sets the lane.
    pub fn with_lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = lane.into();
        self
    }

    /// Sets the flow-control group.
    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Sets the tenant.
    pub fn with_tenant(mut self, tenant: Uuid) -> Self {
        self.tenant_id = tenant;
        self
    }

    /// Sets the idempotency key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the priority (lower runs first).
    pub fn with_priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the earliest run time.
    pub fn with_available_at(mut self, at: DateTime<Utc>) -> Self {
        self.available_at = Some(at);
        self
    }

    /// Sets the attempt budget.
    pub fn with_max_attempts(mut self, n: i32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Sets the id.
    pub fn with_id(mut self, id: Uuid) -> Self {
        self.id = id;
        self
    }

    /// Sets the enqueuing actor.
    pub fn with_actor(mut self, actor: Uuid) -> Self {
        self.created_by = actor;
        self
    }

    /// Checks every field a producer controls.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first field that breaks a rule.
    pub fn validate(&self, max_payload_bytes: usize) -> Result<()> {
        validate_kind(&self.kind)?;
        validate_lane(&self.lane)?;
        if let Some(g) = &self.group {
            validate_group(g)?;
        }
        validate_payload(&self.payload, max_payload_bytes)?;
        if self.max_attempts < 1 {
            return Err(Error::invalid(
                "max_attempts",
                format!("must be at least 1, got {}", self.max_attempts),
            ));
        }
        if let Some(k) = &self.idempotency_key {
            validate_text("idempotency_key", k, MAX_KEY_BYTES)?;
        } else if self.unique_while_active {
            return Err(Error::invalid(
                "unique_while_active",
                "needs an idempotency key to be unique by",
            ));
        }
        if let Some(r) = &self.request_id {
            validate_text("request_id", r, 256)?;
        }
        if let Some(t) = &self.traceparent {
            crate::trace::validate_traceparent(t)?;
        }
        Ok(())
    }
}

/// Checks a kind name: `[a-z0-9_.:-]{1,128}`.
///
/// # Errors
/// [`Error::InvalidInput`] on `kind`.
pub fn validate_kind(kind: &str) -> Result<()> {
    validate_name(
        "kind",
        kind,
        MAX_KIND_LEN,
        |c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b':' | b'-'),
    )
}

/// Checks a group name, as a kind: `[a-z0-9_.:-]{1,128}`.
///
/// # Errors
/// [`Error::InvalidInput`] on `group`.
pub fn validate_group(group: &str) -> Result<()> {
    validate_name(
        "group",
        group,
        MAX_GROUP_LEN,
        |c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b':' | b'-'),
    )
}

/// Checks a lane name: `[a-z0-9_-]{1,64}`.
///
/// # Errors
/// [`Error::InvalidInput`] on `lane`.
pub fn validate_lane(lane: &str) -> Result<()> {
    validate_name(
        "lane",
        lane,
        MAX_LANE_LEN,
        |c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'),
    )
}

fn validate_name(field: &'static str, v: &str, max: usize, ok: impl Fn(u8) -> bool) -> Result<()> {
    if v.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if v.len() > max {
        return Err(Error::invalid(
            field,
            format!("is {} bytes, the limit is {max}", v.len()),
        ));
    }
    if let Some(pos) = v.bytes().position(|c| !ok(c)) {
        // Report the position, never echo a hostile character back.
        return Err(Error::invalid(
            field,
            format!(
                "byte {pos} is not allowed (lowercase letters, digits and {} only)",
                if field == "kind" { "_ . : -" } else { "_ -" }
            ),
        ));
    }
    Ok(())
}

fn validate_text(field: &'static str, v: &str, max: usize) -> Result<()> {
    if v.is_empty() {
        return Err(Error::invalid(field, "must not be empty when given"));
    }
    if v.len() > max {
        return Err(Error::invalid(
            field,
            format!("is {} bytes, the limit is {max}", v.len()),
        ));
    }
    if v.chars().any(|c| c.is_control()) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// Checks a payload against the size limit (the bytes of its JSON text).
///
/// # Errors
/// [`Error::InvalidInput`] on `payload`.
pub fn validate_payload(payload: &serde_json::Value, max_bytes: usize) -> Result<()> {
    validate_json("payload", payload, max_bytes)
}

fn validate_json(field: &'static str, v: &serde_json::Value, max_bytes: usize) -> Result<()> {
    let size = payload_size(v);
    if size > max_bytes {
        return Err(Error::invalid(
            field,
            format!("is {size} bytes, the limit is {max_bytes}"),
        ));
    }
    if contains_nul(v) {
        // PostgreSQL's jsonb cannot store U+0000; refuse it everywhere so the
        // backends agree.
        return Err(Error::invalid(field, "must not contain U+0000"));
    }
    Ok(())
}

fn payload_size(v: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter(0);
    // Serializing a Value into a counting sink cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

fn contains_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(contains_nul),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

/// Parses payload text as JSON, naming the field on failure.
///
/// # Errors
/// [`Error::InvalidInput`] on `payload` when the text is not JSON or is over
/// the limit.
pub fn parse_payload(text: &str, max_bytes: usize) -> Result<serde_json::Value> {
    if text.len() > max_bytes {
        return Err(Error::invalid(
            "payload",
            format!("is {} bytes, the limit is {max_bytes}", text.len()),
        ));
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::invalid(
            "payload",
            format!("is not JSON (line {}, column {})", e.line(), e.column()),
        )
    })?;
    validate_payload(&v, max_bytes)?;
    Ok(v)
}

/// Cuts an error message to [`MAX_ERROR_BYTES`] on a character boundary.
pub fn bound_error(msg: &str) -> String {
    if msg.len() <= MAX_ERROR_BYTES {
        return msg.to_owned();
    }
    let mut end = MAX_ERROR_BYTES;
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    msg[..end].to_owned()
}

/// Which key an insert collided on, if any.
///
/// The caller's own tenant is looked at first: its item with the id
/// (`IdExists`), then its item with the key (`KeyExists`). Only when neither
/// exists and the id is held by another tenant's item is the answer
/// `IdTaken`, which carries nothing of that item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InsertResult {
    /// A new row was written.
    Inserted,
    /// An item of the same tenant with that id already exists; nothing changed.
    IdExists,
    /// An item with that `(tenant, idempotency_key)` already exists; nothing changed.
    KeyExists,
    /// The id is held by an item of another tenant: nothing changed, and
    /// there is nothing this tenant may read back. Bulk enqueue reports it
    /// per row; a single enqueue answers `Conflict` instead.
    IdTaken,
}

/// The answer to an insert: which case, and the row as it now stands (the new
/// one, or the existing one on a collision).
#[derive(Debug, Clone, PartialEq)]
pub struct Inserted {
    /// Which case happened.
    pub result: InsertResult,
    /// The stored row.
    pub item: Item,
}
