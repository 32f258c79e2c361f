//! Helpers for testing handlers without a worker: build the context a
//! claim would make, and run a handler twice on the same item to check it is
//! idempotent.

use chrono::Utc;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{Item, Status};
use crate::queue::{JobContext, Kind};
use crate::worker::{Handler, Outcome};

/// The context a claim of `job` would make: attempt `attempt`, fencing
/// token `claim_seq`, in `tenant`, for `actor`.
///
/// # Errors
/// [`Error::InvalidInput`] when the job does not serialize.
pub fn context_for<K: Kind>(
    job: &K,
    id: Uuid,
    tenant: Uuid,
    actor: Uuid,
    attempt: i32,
    claim_seq: i64,
) -> Result<JobContext> {
    let payload = serde_json::to_value(job)
        .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")))?;
    let now = Utc::now();
    let item = Item {
        id,
        tenant_id: tenant,
        kind: K::NAME.to_owned(),
        lane: K::LANE.to_owned(),
        group: None,
        payload,
        priority: 0,
        status: Status::Claimed,
        available_at: now,
        attempts: attempt - 1,
        max_attempts: K::MAX_ATTEMPTS,
        claimed_by: Some("testkit".into()),
        claim_token: Some(Uuid::new_v4()),
        claim_seq,
        lease_expires_at: Some(now + chrono::Duration::seconds(30)),
        last_error: None,
        idempotency_key: None,
        created_by: actor,
        request_id: None,
        traceparent: None,
        created_at: now,
        updated_at: now,
        updated_by: Uuid::nil(),
        result: None,
        progress: None,
        active_key: None,
    };
    JobContext::from_claimed(item, std::time::Instant::now())
        .ok_or_else(|| Error::invalid("item", "a claimed item carries a token"))
}

/// Runs `handler` twice on the same item, as a redelivery after a crash
/// would: same id, tenant and actor; the second run has the next fencing
/// token. Returns both outcomes; assert that the handler's effects happened
/// once.
///
/// # Errors
/// [`Error::InvalidInput`] when the job does not serialize or decode.
pub async fn run_twice<H: Handler>(
    handler: &H,
    job: &H::Job,
    tenant: Uuid,
    actor: Uuid,
) -> Result<(Outcome, Outcome)> {
    let id = Uuid::now_v7();
    let first_cx = context_for(job, id, tenant, actor, 1, 1)?;
    let second_cx = context_for(job, id, tenant, actor, 1, 2)?;
    let decode = |cx: &JobContext| -> Result<H::Job> {
        serde_json::from_value(cx.item().payload.clone())
            .map_err(|e| Error::invalid("payload", format!("does not decode: {e}")))
    };
    let first = handler.handle(&first_cx, decode(&first_cx)?).await;
    let second = handler.handle(&second_cx, decode(&second_cx)?).await;
    Ok((first, second))
}
