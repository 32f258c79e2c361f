//! A schedule as code declares it, and its compiled form: the cron
//! expression parsed (seconds field optional), the zone resolved, the item
//! each tick enqueues.
//!
//! Invariants: a [`Compiled`] schedule always has a valid name, a parsed
//! cron expression, a known IANA zone and a valid item (kind, lane,
//! payload); anything else is refused by [`Schedule::compile`] with
//! [`Error::InvalidInput`] naming the field, the reason naming the schedule.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::item::NewItem;
use crate::queue::{Kind, Queue};

pub use crate::store::schedule::{MAX_BACKFILL_LIMIT, MisfirePolicy, tick_key};

/// The longest schedule name: the key `periodic:<name>:<tick>` stays short.
pub const MAX_NAME_LEN: usize = 64;
/// The zone a schedule runs in unless it names one.
pub const ZONE_DEFAULT: &str = "UTC";
/// The most missed ticks [`MisfirePolicy::All`] enqueues unless told.
pub const MAX_BACKFILL_DEFAULT: u32 = 100;

/// A periodic job as code declares it: a name, a cron expression, a zone,
/// the item each tick enqueues, a misfire policy and an optional jitter.
/// Nothing is checked until [`Schedule::compile`] (which the worker builder
/// calls), so a schedule can be declared in a `static` registration.
///
/// ```
/// use drover::periodic::{MisfirePolicy, Schedule};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Report {}
/// # impl drover::Kind for Report { const NAME: &'static str = "report"; }
/// let nightly = Schedule::new("nightly-report", "30 2 * * *", Report {})
///     .zone("Europe/Berlin")
///     .misfire(MisfirePolicy::Once);
/// assert!(nightly.compile().is_ok());
/// ```
#[derive(Clone)]
pub struct Schedule {
    name: String,
    cron: String,
    zone: String,
    kind: &'static str,
    payload: std::result::Result<serde_json::Value, String>,
    lane: String,
    group: Option<String>,
    max_attempts: i32,
    misfire: MisfirePolicy,
    jitter: Duration,
    register: fn(&Queue),
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("name", &self.name)
            .field("cron", &self.cron)
            .field("zone", &self.zone)
            .field("kind", &self.kind)
            .field("misfire", &self.misfire)
            .finish_non_exhaustive()
    }
}

fn register_kind<K: Kind>(queue: &Queue) {
    queue.register_kind::<K>();
}

impl Schedule {
    /// A schedule `name` enqueueing `job` on every tick of `cron` (five
    /// fields, or six with seconds first), in UTC, misfire [`MisfirePolicy::Once`],
    /// no jitter. The item takes the kind's lane and budget.
    pub fn new<K: Kind>(name: impl Into<String>, cron: impl Into<String>, job: K) -> Self {
        Schedule {
            name: name.into(),
            cron: cron.into(),
            zone: ZONE_DEFAULT.to_owned(),
            kind: K::NAME,
            payload: serde_json::to_value(&job).map_err(|e| e.to_string()),
            lane: K::LANE.to_owned(),
            group: job.group(),
            max_attempts: K::MAX_ATTEMPTS,
            misfire: MisfirePolicy::default(),
            jitter: Duration::ZERO,
            register: register_kind::<K>,
        }
    }

    /// The IANA zone the cron expression is read in (`Europe/Berlin`).
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = zone.into();
        self
    }

    /// What happens to ticks missed while no worker ran.
    pub fn misfire(mut self, policy: MisfirePolicy) -> Self {
        self.misfire = policy;
        self
    }

    /// Each tick's item becomes available up to this much after its tick
    /// (the same offset on every worker: it is derived from name and tick).
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Overrides the kind's lane.
    pub fn lane(mut self, lane: impl Into<String>) -> Self {
        self.lane = lane.into();
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks everything and parses the expression and zone.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] whose field is `name`, `cron`, `zone`,
    /// `lane`, `kind` or `payload` and whose reason names the schedule.
    pub fn compile(&self) -> Result<Compiled> {
        let refuse = |field: &'static str, why: String| Error::InvalidInput {
            field,
            reason: format!("schedule {:?}: {why}", self.name),
        };
        validate_name(&self.name).map_err(|why| refuse("name", why))?;
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(&self.cron)
            .map_err(|e| {
                refuse(
                    "cron",
                    format!("{:?} is not a cron expression: {e}", self.cron),
                )
            })?;
        let zone: chrono_tz::Tz = self.zone.parse().map_err(|_| {
            refuse(
                "zone",
                format!("{:?} is not an IANA time zone name", self.zone),
            )
        })?;
        crate::item::validate_kind(self.kind).map_err(|e| refuse("kind", e.to_string()))?;
        crate::item::validate_lane(&self.lane).map_err(|e| refuse("lane", e.to_string()))?;
        let payload = self
            .payload
            .clone()
            .map_err(|e| refuse("payload", format!("does not serialize: {e}")))?;
        if let MisfirePolicy::All { max_backfill } = self.misfire
            && !(1..=MAX_BACKFILL_LIMIT).contains(&max_backfill)
        {
            return Err(refuse(
                "misfire",
                format!("max_backfill must be 1 to {MAX_BACKFILL_LIMIT}, not {max_backfill}"),
            ));
        }
        Ok(Compiled {
            name: self.name.clone(),
            cron_text: self.cron.trim().to_owned(),
            cron,
            zone,
            kind: self.kind.to_owned(),
            payload,
            lane: self.lane.clone(),
            group: self.group.clone(),
            max_attempts: self.max_attempts,
            misfire: self.misfire,
            jitter: self.jitter,
            register: self.register,
        })
    }
}

/// `[a-z0-9_.-]{1,64}`: no `:`, so the key `periodic:<name>:<tick>` parses
/// back unambiguously.
fn validate_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("the name must be 1 to {MAX_NAME_LEN} characters"));
    }
    if !name
        .bytes()
        .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
    {
        return Err("the name may hold only a-z, 0-9, '_', '.' and '-'".into());
    }
    Ok(())
}

/// A checked schedule: what the scheduler runs.
#[derive(Clone)]
pub struct Compiled {
    name: String,
    cron_text: String,
    pub(crate) cron: croner::Cron,
    pub(crate) zone: chrono_tz::Tz,
    kind: String,
    payload: serde_json::Value,
    lane: String,
    group: Option<String>,
    max_attempts: i32,
    misfire: MisfirePolicy,
    jitter: Duration,
    register: fn(&Queue),
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("name", &self.name)
            .field("cron", &self.cron_text)
            .field("zone", &self.zone.name())
            .field("kind", &self.kind)
            .field("lane", &self.lane)
            .field("misfire", &self.misfire)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The cron expression as declared.
    pub fn cron(&self) -> &str {
        &self.cron_text
    }
    /// The IANA zone name.
    pub fn zone_name(&self) -> &str {
        self.zone.name()
    }
    /// The kind each tick enqueues.
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The lane its items go to.
    pub fn lane(&self) -> &str {
        &self.lane
    }
    /// The misfire policy.
    pub fn misfire(&self) -> MisfirePolicy {
        self.misfire
    }

    /// Replaces the lane (the heartbeat's comes from the `heartbeat_lane`
    /// setting).
    pub(crate) fn with_lane(mut self, lane: &str) -> Self {
        lane.clone_into(&mut self.lane);
        self
    }

    /// Records the kind's permission and retry policy on `queue`.
    pub(crate) fn register(&self, queue: &Queue) {
        (self.register)(queue);
    }

    /// The state-table declaration of this schedule.
    pub fn decl(&self) -> super::ScheduleDecl {
        super::ScheduleDecl {
            name: self.name.clone(),
            cron: self.cron_text.clone(),
            zone: self.zone.name().to_owned(),
            kind: self.kind.clone(),
            lane: self.lane.clone(),
            misfire: self.misfire,
        }
    }

    /// The item for `tick`, keyed `periodic:<name>:<tick as RFC 3339 UTC>`,
    /// available at the tick plus this schedule's jitter for that tick.
    pub fn item_for(&self, tick: DateTime<Utc>) -> NewItem {
        let offset = jitter_offset(&self.name, tick, self.jitter);
        let mut item = NewItem::new(self.kind.as_str(), self.payload.clone())
            .with_lane(self.lane.as_str())
            .with_max_attempts(self.max_attempts)
            .with_key(tick_key(&self.name, tick))
            .with_available_at(tick + offset);
        item.group.clone_from(&self.group);
        item
    }

    /// An item enqueued by hand now: key `periodic:<name>:manual:<id>`.
    pub fn manual_item(&self) -> NewItem {
        let mut item = NewItem::new(self.kind.as_str(), self.payload.clone())
            .with_lane(self.lane.as_str())
            .with_max_attempts(self.max_attempts);
        item.group.clone_from(&self.group);
        let key = format!("periodic:{}:manual:{}", self.name, item.id);
        item.with_key(key)
    }
}

/// A deterministic offset in `[0, jitter)` from the name and tick, so every
/// worker computes the same item for a tick.
fn jitter_offset(name: &str, tick: DateTime<Utc>, jitter: Duration) -> chrono::Duration {
    if jitter.is_zero() {
        return chrono::Duration::zero();
    }
    // FNV-1a: stable across processes and releases, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain(tick.timestamp().to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let micros = u64::try_from(jitter.as_micros()).unwrap_or(u64::MAX).max(1);
    chrono::Duration::microseconds(i64::try_from(h % micros).unwrap_or(0))
}
