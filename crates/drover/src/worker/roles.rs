//! The roles a worker runs beside its claim loop, as `drover handlers`
//! lists them: the sweep's declaration, the runtime's share of the four
//! strategies for the roles whose own declaration does not (yet) carry all
//! of them, and the idle claim loop of a worker that runs roles only.
//!
//! Invariant: every role the [`Registry`](super::Registry) holds declares
//! idempotency, retry, checkpoint and recovery (the registry refuses one
//! that does not). A projector, a workflow runner and a sync reconciler
//! declare their own role-specific strategies in their modules; where such
//! a declaration lacks one of the four, [`complete`] fills it with what
//! drover's runtime guarantees for that role, worded as the runtime's
//! (never as the user's code's), and only the missing ones: a module that
//! declares its own keeps its own.

use super::{RoleInfo, Strategy};

/// The claim loop of a worker with no handler (roles only): it claims
/// nothing — a claim with no kinds would take items of every kind — and
/// only shows it is alive to `/healthz`, until claiming stops.
pub(super) async fn claim_nothing(
    health: std::sync::Arc<super::Health>,
    fetch: tokio_util::sync::CancellationToken,
    every: std::time::Duration,
) {
    loop {
        health.loop_tick();
        tokio::select! {
            () = fetch.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// What the sweep declares, as `drover handlers` prints it.
pub const SWEEP_STRATEGY: Strategy = Strategy {
    idempotency: "every step is idempotent and every item write is fenced on the item's own \
                  state in its statement: a second sweeper (a holder that lost the lease \
                  mid-step) only repeats work, never makes a wrong write",
    retry: "a step that fails, hangs past its step timeout or panics is reported and the next \
            step and the next pass (every sweep interval, jittered) run; nothing is retried in \
            a loop",
    checkpoint: "none: each pass reads the items, outbox rows and markers afresh; one sweeper \
                 at a time by the sweep lease on the database clock",
    recovery: "a sweeper that dies, hangs or is paused loses the sweep lease when it passes, and \
               any worker takes it on its next tick",
};

/// The sweep's role row, naming its steps.
pub(crate) fn sweep_role(steps: &[String]) -> RoleInfo {
    let steps = if steps.is_empty() {
        "the built-in steps only".to_owned()
    } else {
        format!("the built-in steps, then {}", steps.join(", "))
    };
    RoleInfo::new("sweep", "sweep", SWEEP_STRATEGY).with(
        "steps",
        format!(
            "requeue stale items, settle counts, purge final items past retention, purge \
             silent workers and expired idempotency markers; {steps}"
        ),
    )
}

/// Fills the strategies of the four a drover role's declaration lacks with
/// the runtime's guarantee for that role (see the module docs); a role
/// drover does not know is returned as it is (and refused by the registry
/// if it lacks one).
///
/// Declared here, where the worker registers the role, until the role's
/// module declares all four itself: each text says what the runtime does,
/// whatever the user's code is.
pub(crate) fn complete(mut role: RoleInfo) -> RoleInfo {
    let runtime: &[(&str, &str)] = match role.role.as_str() {
        "projector" => &[
            (
                "idempotency",
                "on PostgreSQL and SQLite the checkpoint moves in the transaction that applies \
                 the batch, fenced on the runner's lease: no event is applied twice; a \
                 projection kept elsewhere (the memory store's) gets each event at least once \
                 and keys its writes on the event's id or position",
            ),
            (
                "retry",
                "a batch whose apply fails is rolled back and retried on a later pass; the \
                 projector stalls on a poison event (its lag gauge grows) rather than skip it",
            ),
            (
                "checkpoint",
                "a checkpoint per (projector, tenant): the position of the last event applied, \
                 moved with the batch",
            ),
            (
                "recovery",
                "one runner per (projector, tenant) by a lease on the database clock: a runner \
                 that dies is replaced once its lease passes, and the next one resumes from \
                 the committed checkpoint",
            ),
        ],
        "sync reconciler" => &[
            (
                "idempotency",
                "a change at or below the version last taken from the source for its record \
                 is a replay and changes nothing; the checkpoint moves by a compare-and-set, so \
                 of two runners applying one batch only one lands",
            ),
            (
                "retry",
                "a failed pull or apply changes nothing; the next run (after the interval) \
                 pulls the same changes again from the committed cursor",
            ),
            (
                "recovery",
                "a batch's records and the cursor past it commit in one transaction: a crash \
                 mid-batch leaves neither, and the next run pulls the batch again",
            ),
        ],
        "workflow runner" => &[
            (
                "idempotency",
                "each step runs as a drover.step work item whose transition lands in the \
                 transaction that completes the item, fenced on its claim; the record changes \
                 only by a compare-and-set on its version, so a step run twice moves it once",
            ),
            (
                "retry",
                "a step that fails is retried as its work item is (backoff, the kind's budget); \
                 one that fails for good fails the orchestration into compensation",
            ),
            (
                "checkpoint",
                "the orchestration record: its state and completed steps, written with each \
                 step's transition; a rerun resumes from the last completed step",
            ),
            (
                "recovery",
                "a step item whose worker died is swept after its lease and run again; parked \
                 orchestrations are resumed by the sweep step resume_parked",
            ),
        ],
        _ => &[],
    };
    for (what, says) in runtime {
        if role.strategy(what).is_none() {
            role.strategies
                .push(((*what).to_owned(), (*says).to_owned()));
        }
    }
    role
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_keeps_a_modules_own_text_and_fills_only_the_missing() {
        let own = RoleInfo {
            role: "projector".into(),
            name: "orders".into(),
            strategies: vec![
                ("retry".into(), "the module's own".into()),
                ("lag".into(), "seconds".into()),
            ],
        };
        let done = complete(own);
        assert_eq!(done.strategy("retry"), Some("the module's own"));
        for what in super::super::ROLE_STRATEGIES {
            assert!(done.strategy(what).is_some(), "{what}");
        }
        let unknown = RoleInfo {
            role: "custom".into(),
            name: "x".into(),
            strategies: vec![],
        };
        assert!(complete(unknown).strategies.is_empty());
    }
}
