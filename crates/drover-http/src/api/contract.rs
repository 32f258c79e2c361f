//! The parts of the OpenAPI document every operation shares, applied to
//! the generated document in one place so no handler can leave them out:
//! the `servers` entry, the `Idempotency-Key` header's schema, and the
//! error answers any route can give whatever its handler does (the
//! request head's 414 and 431, 413 where a body is read, 401 off the open
//! paths, and 500 and 503 where the database is asked), each with the
//! problem schema.
//!
//! Also the names status-like strings take, as schema enums: the views
//! keep them as strings, the document lists every value.

use serde_json::json;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{OpenApi, RefOr, Required, Response, Schema};
use utoipa::{Modify, ToSchema};

use crate::auth::OPEN_PATHS;
use crate::problem::PROBLEM_JSON;

/// An item's status.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Waiting to be claimed once `available_at` has passed.
    Pending,
    /// Held by a worker under a lease.
    Claimed,
    /// Finished.
    Done,
    /// Out of attempts: the dead letter.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
}

/// What an insert did.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum InsertOutcome {
    /// Written.
    Inserted,
    /// An item with this id exists: nothing changed.
    IdExists,
    /// An item with this key exists: nothing changed.
    KeyExists,
    /// The id belongs to another tenant's item: nothing changed.
    IdTaken,
}

/// A worker's liveness.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum WorkerState {
    /// Beating and claiming.
    Running,
    /// Finishing what it holds; claims nothing new.
    Draining,
    /// Stopped cleanly.
    Offline,
    /// Stopped beating without saying so.
    Lost,
}

/// Why a pending item has not started.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum WaitCode {
    /// It is no longer pending.
    NotPending,
    /// Its run time has not come.
    RunAt,
    /// It waits for dependencies that are not done yet.
    Dependencies,
    /// Its lane is paused.
    LanePaused,
    /// A concurrency limit it counts against is full.
    LimitFull,
    /// An earlier item of its ordered group runs or waits first.
    EarlierInGroup,
    /// Its group (or its kind) is closed until a time.
    GroupClosed,
    /// A rate limit it starts against has no start to give until a time.
    RateLimited,
    /// No live worker drains its lane or handles its kind.
    NoWorker,
}

/// How a run ended.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum RunOutcomeCode {
    /// The handler finished: the item is done.
    Done,
    /// The handler failed and another attempt was allowed.
    Retry,
    /// The handler failed for the last time (or fatally): dead-lettered.
    Failed,
    /// Cancelled while claimed, by the handler or an operator.
    Cancelled,
    /// Deferred: pending again later, no attempt spent.
    Snoozed,
    /// Handed back: pending again at once, no attempt spent.
    Released,
    /// The lease passed before the worker wrote.
    LeaseLost,
}

/// A limit's scope.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum LimitScopeName {
    /// A lane.
    Lane,
    /// A kind, every group together.
    Kind,
    /// Each group of a kind separately.
    Group,
}

/// Where a limit comes from.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum LimitSourceName {
    /// Declared in the workers' code.
    Code,
    /// Set by an operator (wins over the code's).
    Operator,
}

/// An orchestration's status.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum OrchestrationState {
    /// A step's work item is pending or running.
    Running,
    /// Waiting for a time or a signal.
    Parked,
    /// Its current step is not in the deployed code.
    Stuck,
    /// Final: completed with a result.
    Completed,
    /// Compensating a failure, newest step first.
    Compensating,
    /// Final: failed and compensated.
    Compensated,
    /// Final: a compensation failed for good.
    CompensationFailed,
    /// Final: cancelled and compensated.
    Cancelled,
}

/// The `Idempotency-Key` header as the server reads it: optional; when
/// sent, 1 to 255 bytes of visible ASCII or space (a structured-field
/// string's quotes around a non-empty key are dropped).
pub fn idempotency_key_schema() -> serde_json::Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": super::idempotency::KEY_MAX_BYTES,
        "pattern": "^[ -~]+$"
    })
}

/// Applies the shared parts; see the module docs.
pub struct Contract;

impl Modify for Contract {
    fn modify(&self, openapi: &mut OpenApi) {
        openapi.servers = Some(vec![
            utoipa::openapi::server::ServerBuilder::new()
                .url("/")
                .description(Some(
                    "this server; the document served at `<prefix>/v1/openapi.json` names its prefix",
                ))
                .build(),
        ]);
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in ops.into_iter().flatten() {
                shared(path, op);
            }
        }
    }
}

fn problem(description: &str) -> RefOr<Response> {
    let v = json!({
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    });
    // A literal of the Response shape: it always deserialises.
    serde_json::from_value(v).unwrap_or_else(|_| RefOr::T(Response::new(description)))
}

fn shared(path: &str, op: &mut Operation) {
    let open = OPEN_PATHS.contains(&path);
    let asks_db = path != "/healthz" && path != "/v1/openapi.json";
    let mut add = |status: &str, description: &str| {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| problem(description));
    };
    add("414", "the request-target is too long");
    add("431", "the header section is too large");
    if !open {
        add("401", "no credentials");
    }
    if asks_db {
        add("503", "the database does not answer; retry later");
        if path != "/readyz" {
            add("500", "an error the caller cannot fix");
        }
    }
    if op.request_body.is_some() {
        add("413", "body too large");
    }
    for p in op.parameters.iter_mut().flatten() {
        if p.parameter_in == ParameterIn::Header && p.name == "Idempotency-Key" {
            p.required = Required::False;
            p.schema = serde_json::from_value::<Schema>(idempotency_key_schema())
                .ok()
                .map(RefOr::T);
        }
    }
}
