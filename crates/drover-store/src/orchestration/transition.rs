//! The pure transitions every backend and the runner share: the step item a
//! record's next step runs as, and the wake-ups (by a signal, by the sweep).
//!
//! Kept here, written once, so the three backends cannot disagree on what a
//! wake-up writes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{HistoryEntry, Orchestration, OrchestrationStatus, RecordWrite, Signal, Transition};
use drover_core::item::NewItem;

/// The payload of a step's work item: which record, at which version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepJob {
    /// The orchestration.
    pub orchestration_id: Uuid,
    /// The record's version this step runs against; a record that has moved
    /// on makes the item stale (completed, changing nothing).
    pub version: i64,
    /// The payload of the signal that woke the record, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<serde_json::Value>,
}

/// The built-in kind every orchestration step runs as.
pub const STEP_KIND: &str = "drover.step";

/// The work item that runs record `id`'s step at `version`. Its key
/// (`drover.step:<id>:<version>`) allows one item per version.
pub fn step_item(
    tenant: Uuid,
    id: Uuid,
    lane: &str,
    max_attempts: i32,
    version: i64,
    signal: Option<serde_json::Value>,
) -> NewItem {
    let job = StepJob {
        orchestration_id: id,
        version,
        signal,
    };
    // A struct of a Uuid, an integer and a JSON value always serializes.
    let payload = serde_json::to_value(&job).unwrap_or(serde_json::Value::Null);
    NewItem::new(STEP_KIND, payload)
        .with_tenant(tenant)
        .with_lane(lane)
        .with_max_attempts(max_attempts)
        .with_key(format!("{STEP_KIND}:{id}:{version}"))
}

/// The transition that wakes `r` (parked for `sig.name`) with `sig`: running
/// its next step, the signal consumed, the step item carrying its payload.
pub fn wake_on_signal(r: &Orchestration, sig: &Signal, now: DateTime<Utc>) -> Transition {
    let mut w = RecordWrite::of(r);
    w.status = OrchestrationStatus::Running;
    w.parked_until = None;
    w.waiting_for = None;
    w.timeout_step = None;
    w.push_history(HistoryEntry {
        step: r.step.clone(),
        attempt: 0,
        started: now,
        ended: now,
        outcome: format!("signal {} received", sig.name),
    });
    // The step item carries the signal's payload, unlike `transition`'s.
    Transition {
        enqueue: Some(step_item(
            r.tenant_id,
            r.id,
            &r.lane,
            r.max_attempts,
            r.version + 1,
            Some(sig.payload.clone()),
        )),
        consume_signal: Some(sig.id),
        ..transition(r, w, false)
    }
}

/// The transition the sweep writes for a parked record whose time has
/// come: a time park resumes its step; a signal wait times out into its
/// timeout step.
pub fn resume_due(r: &Orchestration, now: DateTime<Utc>) -> Transition {
    let mut w = RecordWrite::of(r);
    w.status = OrchestrationStatus::Running;
    w.parked_until = None;
    let outcome = match (&r.waiting_for, &r.timeout_step) {
        (Some(name), Some(timeout)) => {
            w.step = timeout.clone();
            format!("signal {name} timed out: next {timeout}")
        }
        _ => "park time reached".to_owned(),
    };
    w.waiting_for = None;
    w.timeout_step = None;
    w.push_history(HistoryEntry {
        step: r.step.clone(),
        attempt: 0,
        started: now,
        ended: now,
        outcome,
    });
    transition(r, w, true)
}

/// True when `t` parks its record for a signal (the store then looks for
/// one already waiting, in the same transaction).
pub fn parks_for_signal(t: &Transition) -> Option<&str> {
    match (t.write.status, &t.write.waiting_for) {
        (OrchestrationStatus::Parked, Some(name)) => Some(name),
        _ => None,
    }
}

/// True when `r`, as a transition just left it, carries an operator's cancel
/// request and is `running` or `parked`: the store then inserts none of
/// the transition's item (nor matches a waiting signal) and applies
/// [`cancel_requested`] in the same transaction. The step that just landed
/// is in the completed list by then, so its compensation runs first.
pub fn cancel_due(r: &Orchestration) -> bool {
    r.cancel_requested
        && matches!(
            r.status,
            OrchestrationStatus::Running | OrchestrationStatus::Parked
        )
}

/// The transition that starts compensating `r` for an operator's cancel
/// request: newest completed step first, ending `cancelled`.
pub fn cancel_requested(r: &Orchestration, now: DateTime<Utc>) -> Transition {
    let mut w = RecordWrite::of(r);
    w.push_history(HistoryEntry {
        step: r.step.clone(),
        attempt: 0,
        started: now,
        ended: now,
        outcome: "cancelled by an operator".into(),
    });
    begin_compensation(r, w, "cancelled by an operator".into(), true)
}

/// The write of `rec` as `w`, with the next step's item when `next_item`
/// (the record's next version).
pub fn transition(rec: &Orchestration, w: RecordWrite, next_item: bool) -> Transition {
    let enqueue = next_item.then(|| {
        step_item(
            rec.tenant_id,
            rec.id,
            &rec.lane,
            rec.max_attempts,
            rec.version + 1,
            None,
        )
    });
    Transition {
        tenant_id: rec.tenant_id,
        id: rec.id,
        expected_version: rec.version,
        write: w,
        enqueue,
        consume_signal: None,
    }
}

/// The write that starts compensating the completed steps (newest first),
/// or ends the record at once when none completed. Shared with an
/// operator's cancel.
pub fn begin_compensation(
    rec: &Orchestration,
    mut w: RecordWrite,
    error: String,
    cancel: bool,
) -> Transition {
    w.error = Some(error);
    w.cancel_requested = cancel;
    w.parked_until = None;
    w.waiting_for = None;
    w.timeout_step = None;
    w.resume_as = None;
    match w.completed.last().cloned() {
        Some(last) => {
            w.status = OrchestrationStatus::Compensating;
            w.step = last;
            transition(rec, w, true)
        }
        None => {
            w.status = if cancel {
                OrchestrationStatus::Cancelled
            } else {
                OrchestrationStatus::Compensated
            };
            transition(rec, w, false)
        }
    }
}
