//! An HTTP worker for the fault suite: it drives the protocol of
//! docs/http.md (workers over HTTP) from Rust over a plain HTTP/1.1
//! client (hyper): batch claims with a long poll, a handler that logs its
//! start and writes its effect through the fenced write
//! ([`crate::effects`]), and a completion presenting the claim token,
//! retried until answered. The scenarios run it in process or as the
//! `drover-fault-http-worker` binary (killed with SIGKILL).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::effects::{EffectsDb, Op};

/// One keep-alive HTTP/1.1 connection, reopened after an error.
pub struct Client {
    addr: SocketAddr,
    token: String,
    conn: Option<http1::SendRequest<Full<Bytes>>>,
}

impl Client {
    /// A client of the server at `addr`, presenting `token`.
    pub fn new(addr: SocketAddr, token: &str) -> Client {
        Client {
            addr,
            token: token.to_owned(),
            conn: None,
        }
    }

    /// POSTs `body` to `path`.
    ///
    /// # Errors
    /// A transport error: no answer (the connection is dropped and the
    /// next call opens another).
    pub async fn post(&mut self, path: &str, body: &Value) -> anyhow::Result<(StatusCode, Value)> {
        if self.conn.is_none() {
            let stream = tokio::net::TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.conn = Some(sender);
        }
        let Some(sender) = self.conn.as_mut() else {
            anyhow::bail!("no connection");
        };
        let req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", "drover")
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
        let sent = async {
            sender.ready().await?;
            let res = sender.send_request(req).await?;
            let status = res.status();
            let bytes = res.into_body().collect().await?.to_bytes();
            anyhow::Ok((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ))
        }
        .await;
        if sent.is_err() {
            self.conn = None;
        }
        sent
    }
}

/// What an HTTP worker counted.
#[derive(Debug, Default)]
pub struct Counts {
    /// Claim requests answered 200.
    pub claims: AtomicU64,
    /// Items handed out.
    pub claimed: AtomicU64,
    /// Completions answered 200.
    pub completed: AtomicU64,
    /// Writes answered 409 (a stale claim: nothing changed).
    pub conflicts: AtomicU64,
    /// Claims answered 503 (the server draining).
    pub drained: AtomicU64,
    /// Requests that got no answer (the server down): retried.
    pub transport_errors: AtomicU64,
}

impl Counts {
    /// One counter's value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }
}

/// An HTTP worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// Its worker id (its row in the workers table).
    pub id: String,
    /// The lanes it claims from.
    pub lanes: Vec<String>,
    /// Items run at once.
    pub capacity: usize,
    /// The lease each claim asks for, in milliseconds.
    pub lease_ms: u64,
    /// The long poll of each claim, in milliseconds.
    pub wait_ms: u64,
}

/// Runs an HTTP worker until `stop` (drain-first: it claims nothing more,
/// finishes what it holds, then says goodbye). Each handler logs its start, sleeps the
/// payload's `ms`, writes its effect through the fenced write and
/// completes, retrying a completion that got no answer until it is
/// answered (200, or 409: the claim is gone).
pub async fn run_worker(
    addr: SocketAddr,
    token: String,
    spec: WorkerSpec,
    db: EffectsDb,
    counts: Arc<Counts>,
    stop: CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(spec.capacity));
    let mut client = Client::new(addr, &token);
    let mut handlers = tokio::task::JoinSet::new();
    while !stop.is_cancelled() {
        // Wait for at least one free slot, then claim as many as are free.
        let Ok(first) = slots.clone().acquire_owned().await else {
            break;
        };
        let mut permits = vec![first];
        while let Ok(p) = slots.clone().try_acquire_owned() {
            permits.push(p);
        }
        let body = json!({
            "worker_id": spec.id, "lanes": spec.lanes, "max": permits.len(),
            "lease_ms": spec.lease_ms, "wait_ms": spec.wait_ms, "capacity": spec.capacity,
        });
        let answer = tokio::select! {
            () = stop.cancelled() => break,
            a = client.post("/v1/work/claim", &body) => a,
        };
        let items = match answer {
            Ok((StatusCode::OK, b)) => {
                counts.claims.fetch_add(1, Ordering::SeqCst);
                b["items"].as_array().cloned().unwrap_or_default()
            }
            Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => {
                counts.drained.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Ok((s, b)) => {
                // A refusal no retry fixes (a bad token or grant): stop.
                tracing::error!(%s, %b, "claim refused");
                break;
            }
            Err(_) => {
                counts.transport_errors.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        counts
            .claimed
            .fetch_add(items.len() as u64, Ordering::SeqCst);
        for item in items {
            // The claim asked for at most one item per permit.
            let Some(permit) = permits.pop() else { break };
            let (db, counts) = (db.clone(), counts.clone());
            let token = token.clone();
            handlers.spawn(async move {
                handle(addr, &token, &db, &counts, &item).await;
                drop(permit);
            });
        }
        while handlers.try_join_next().is_some() {}
    }
    while handlers.join_next().await.is_some() {}
    // Its goodbye: the row reads `offline` rather than going `lost`. On a
    // connection of its own: a long poll cut by the stop may hold the
    // claim's.
    let _ = Client::new(addr, &token)
        .post(&format!("/v1/work/workers/{}/stop", spec.id), &json!(null))
        .await;
}

/// One item's run: start, work, fenced effect, completion.
pub async fn handle(addr: SocketAddr, token: &str, db: &EffectsDb, counts: &Counts, item: &Value) {
    let Ok(id) = serde_json::from_value::<uuid::Uuid>(item["id"].clone()) else {
        tracing::error!(%item, "a claimed item without an id");
        return;
    };
    let op_id = item["payload"]["op_id"].as_str().unwrap_or("?").to_owned();
    let op = Op {
        op_id: &op_id,
        item_id: id,
        token: item["fencing_token"].as_i64().unwrap_or(0),
        attempt: item["attempt"]
            .as_i64()
            .and_then(|a| i32::try_from(a).ok())
            .unwrap_or(0),
    };
    while db.log_start(op).await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ms = item["payload"]["ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    while db.write(op).await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    complete(addr, token, counts, item).await;
}

/// Sends the completion until it is answered; 200 or 409.
pub async fn complete(addr: SocketAddr, token: &str, counts: &Counts, item: &Value) -> StatusCode {
    let mut client = Client::new(addr, token);
    let path = format!(
        "/v1/work/items/{}/complete",
        item["id"].as_str().unwrap_or_default()
    );
    let body = json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]});
    loop {
        match client.post(&path, &body).await {
            Ok((StatusCode::OK, _)) => {
                counts.completed.fetch_add(1, Ordering::SeqCst);
                return StatusCode::OK;
            }
            Ok((StatusCode::CONFLICT, _)) => {
                counts.conflicts.fetch_add(1, Ordering::SeqCst);
                return StatusCode::CONFLICT;
            }
            Ok((s, b)) if s.is_server_error() => {
                tracing::debug!(%s, %b, "completion refused for now; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok((s, b)) => {
                tracing::error!(%s, %b, "completion refused");
                return s;
            }
            Err(_) => {
                counts.transport_errors.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The arguments of `drover-fault-http-worker`.
#[derive(Debug, clap::Parser)]
#[command(name = "drover-fault-http-worker")]
pub struct HttpWorkerArgs {
    /// The server's address (`127.0.0.1:PORT`).
    #[arg(long)]
    pub addr: SocketAddr,
    /// The worker token (from the environment, so it is not in `ps`).
    #[arg(long, env = "DROVER_FAULT_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The worker's id.
    #[arg(long)]
    pub id: String,
    /// The lanes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub lanes: Vec<String>,
    /// Items run at once.
    #[arg(long, default_value_t = 5)]
    pub capacity: usize,
    /// The lease asked for, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub lease_ms: u64,
    /// The long poll, in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    pub wait_ms: u64,
    /// The PostgreSQL URL of the effect tables.
    #[arg(long)]
    pub database_url: String,
    /// The schema of the drover and effect tables.
    #[arg(long, default_value = "drover")]
    pub schema: String,
}

/// The binary's body: runs the worker until SIGTERM (then drains), or
/// until killed.
///
/// # Errors
/// Bad arguments; the effects pool not connecting; the signal handler.
pub async fn main(args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    use clap::Parser;
    let mut args = args;
    // `procs::Proc::spawn` runs `bin worker <args>`, the fault worker's
    // command line; the word is accepted and skipped here.
    if args.get(1).is_some_and(|a| a == "worker") {
        args.remove(1);
    }
    let args = HttpWorkerArgs::try_parse_from(args)?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::try_from(args.capacity.clamp(1, 32)).unwrap_or(8))
        .connect(&args.database_url)
        .await?;
    let db = EffectsDb::Pg {
        pool,
        schema: args.schema.clone(),
    };
    let stop = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let spec = WorkerSpec {
        id: args.id.clone(),
        lanes: args.lanes.clone(),
        capacity: args.capacity,
        lease_ms: args.lease_ms,
        wait_ms: args.wait_ms,
    };
    let counts = Arc::new(Counts::default());
    let worker = tokio::spawn(run_worker(
        args.addr,
        args.token.clone(),
        spec,
        db,
        counts.clone(),
        stop.clone(),
    ));
    tracing::warn!(worker = %args.id, "fault HTTP worker ready");
    term.recv().await;
    tracing::warn!("SIGTERM: draining");
    stop.cancel();
    worker.await?;
    tracing::warn!(
        completed = Counts::get(&counts.completed),
        conflicts = Counts::get(&counts.conflicts),
        "fault HTTP worker stopped"
    );
    Ok(())
}
