//! `drover bench --http`: enqueue over the HTTP API on loopback, against
//! PostgreSQL, in a sandbox schema of its own, with `pgbench -N` run in the
//! same process for the ratio.
//!
//! 1. **Single**: the API's router (`drover_http`, request gathering on,
//!    as `drover serve` runs it) serves on `127.0.0.1:<free port>` in this
//!    process, behind a token held in memory (as `serve` holds its one-time
//!    token). `clients` keep-alive HTTP/1.1 connections, opened before the
//!    clock starts, each send `POST /v1/items` one at a time for
//!    `duration`, every request with a fresh `Idempotency-Key`. Reported:
//!    requests/s (201 answers / wall time), p50 / p99 of each request's
//!    round trip, and how many gathered batches carried them.
//! 2. **Batch**: `batch_clients` connections send `POST /v1/items/batch`
//!    of `batch` items each (with a key too) until `batch_items` items are
//!    in; items/s = items / wall time.
//! 3. **Baseline** ([`crate::pgbench`]): `pgbench -i -s <scale>` into a
//!    scratch schema, then `pgbench -N -c <pgbench_clients> -j 2 -T
//!    <duration>`; the ratio is single requests/s over pgbench's TPS.
//!
//! Every answer is checked (201, or the phase fails) and the items that
//! landed are counted in the database. The sandbox and the scratch schema
//! are dropped whether the run succeeded or not.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_http::{ApiPrincipal, Auth, HttpConfig, Role, TokenSecret};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::report::Percentiles;
use crate::target::Target;
use crate::{BenchError, Progress};

/// `--http-clients`: concurrent keep-alive connections of the single phase.
pub const CLIENTS_DEFAULT: usize = 64;
/// `--http-duration`: how long the single phase (and pgbench) runs.
pub const DURATION_DEFAULT: Duration = Duration::from_secs(10);
/// Concurrent connections of the batch phase.
pub const BATCH_CLIENTS_DEFAULT: usize = 4;
/// `--pgbench-scale`: `pgbench -i -s`, as `BENCH.md` initialises it.
pub const PGBENCH_SCALE_DEFAULT: u32 = 10;
/// The kind of every item the HTTP bench enqueues (no worker runs it).
pub const HTTP_KIND: &str = "drover_bench.http";
/// The lane of the single phase's items.
pub const SINGLE_LANE: &str = "http_bench_single";
/// The lane of the batch phase's items.
pub const BATCH_LANE: &str = "http_bench_batch";

/// What the HTTP bench is told.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSpec {
    /// Keep-alive connections of the single phase.
    pub clients: usize,
    /// How long the single phase runs (and pgbench's `-T`, rounded up to
    /// whole seconds).
    pub duration: Duration,
    /// Connections of the batch phase.
    pub batch_clients: usize,
    /// Items per batch request.
    pub batch: usize,
    /// Items the batch phase enqueues.
    pub batch_items: u64,
    /// pgbench's clients (`-c`); `None` skips pgbench.
    pub pgbench_clients: Option<usize>,
    /// `pgbench -i -s`.
    pub pgbench_scale: u32,
    /// The server's request gathering (`drover serve`'s defaults unless
    /// told).
    pub gather: drover_http::api::gather::GatherConfig,
}

/// What the HTTP bench found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpReport {
    /// The database, without credentials.
    pub target: String,
    /// Connections of the single phase.
    pub clients: usize,
    /// 201 answers in the single phase.
    pub single_requests: u64,
    /// Single-item requests per second.
    pub single_per_sec: f64,
    /// Round trip of one single-item request, ms.
    pub single_latency: Percentiles,
    /// Gathered batches that carried the single phase.
    pub gathered_batches: u64,
    /// Mean requests per gathered batch.
    pub gathered_mean: f64,
    /// Items the batch phase enqueued.
    pub batch_items: u64,
    /// Items per batch request.
    pub batch: usize,
    /// Batch phase items per second.
    pub batch_items_per_sec: f64,
    /// Items found in the database afterwards (single + batch).
    pub items_landed: i64,
    /// pgbench `-N` transactions per second, when run.
    pub pgbench_tps: Option<f64>,
    /// pgbench's clients.
    pub pgbench_clients: Option<usize>,
    /// `single_per_sec / pgbench_tps`.
    pub ratio: Option<f64>,
}

impl HttpReport {
    /// Writes the figures as a table.
    ///
    /// # Errors
    /// Write errors.
    pub fn write_table(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(out, "HTTP bench on {}", self.target)?;
        let p = &self.single_latency;
        writeln!(
            out,
            "single   {} clients  {} requests  {:.0} requests/s  p50 {:.2} ms  p99 {:.2} ms  ({} gathered batches, {:.1} requests each)",
            self.clients,
            self.single_requests,
            self.single_per_sec,
            p.p50,
            p.p99,
            self.gathered_batches,
            self.gathered_mean
        )?;
        writeln!(
            out,
            "batch    {} items, {} per request  {:.0} items/s",
            self.batch_items, self.batch, self.batch_items_per_sec
        )?;
        writeln!(out, "landed   {} items", self.items_landed)?;
        match (self.pgbench_tps, self.ratio, self.pgbench_clients) {
            (Some(tps), Some(ratio), Some(c)) => writeln!(
                out,
                "pgbench  -N -c {c}  {tps:.0} TPS   single / pgbench = {ratio:.2}"
            ),
            _ => writeln!(out, "pgbench  not run"),
        }
    }
}

/// A keep-alive HTTP/1.1 connection to the bench server.
struct Client {
    sender: http1::SendRequest<Full<Bytes>>,
    auth: String,
}

impl Client {
    async fn connect(addr: SocketAddr, token: &TokenSecret) -> Result<Client, BenchError> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| BenchError::io("connecting to the bench server", e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| BenchError::io("setting TCP_NODELAY", e))?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http_err)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "bench connection closed");
            }
        });
        Ok(Client {
            sender,
            auth: format!("Bearer {}", token.expose()),
        })
    }

    /// Sends one POST and answers its status, after reading the body.
    async fn post(&mut self, path: &str, key: &str, body: Vec<u8>) -> Result<u16, BenchError> {
        self.sender.ready().await.map_err(http_err)?;
        let req = hyper::Request::post(path)
            .header("host", "127.0.0.1")
            .header("authorization", &self.auth)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| BenchError::Http(e.to_string()))?;
        let res = self.sender.send_request(req).await.map_err(http_err)?;
        let status = res.status().as_u16();
        res.into_body().collect().await.map_err(http_err)?;
        Ok(status)
    }
}

fn http_err(e: hyper::Error) -> BenchError {
    BenchError::Http(e.to_string())
}

/// The single phase's request body for item `n` of client `c`.
fn single_body(c: usize, n: u64) -> Vec<u8> {
    format!(r#"{{"kind":"{HTTP_KIND}","lane":"{SINGLE_LANE}","payload":{{"c":{c},"n":{n}}}}}"#)
        .into_bytes()
}

/// A batch request body of `count` items starting at `from`.
fn batch_body(from: u64, count: usize) -> Vec<u8> {
    let mut s = String::with_capacity(count * 64 + 16);
    s.push_str(r#"{"items":["#);
    for i in 0..count as u64 {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"kind":"{HTTP_KIND}","lane":"{BATCH_LANE}","payload":{{"n":{}}}}}"#,
            from + i
        ));
    }
    s.push_str("]}");
    s.into_bytes()
}

/// Runs the HTTP bench against `target` (PostgreSQL).
///
/// # Errors
/// [`BenchError::Http`] when a request fails or answers other than 201;
/// [`BenchError::Incomplete`] when the items found differ from the answers;
/// database errors; pgbench not found or failing.
pub(crate) async fn run(
    spec: &HttpSpec,
    target: &Target,
    progress: &Progress,
) -> Result<HttpReport, BenchError> {
    let clients = spec.clients.max(1);
    let queue = target.queue(8).await?;
    let secret = TokenSecret::generate();
    let auth = Auth::deny_all().with_token(
        &secret,
        ApiPrincipal {
            token_id: uuid::Uuid::now_v7(),
            role: Role::Admin,
            tenant: None,
            enqueue: vec!["*".into()],
            work: vec![],
        },
    );
    let config = HttpConfig {
        gather: spec.gather.clone(),
        ..HttpConfig::default()
    };
    let (router, stats) = drover_http::router_and_stats(queue, auth, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| BenchError::io("binding the bench server", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| BenchError::io("reading the bench server's address", e))?;
    let stop = CancellationToken::new();
    let server = {
        let stop = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        })
    };
    let result = phases(spec, clients, addr, &secret, &stats, target, progress).await;
    stop.cancel();
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "bench server stopped with an error"),
        Err(e) => tracing::warn!(error = %e, "bench server task failed"),
    }
    let mut report = result?;
    if let Some(c) = spec.pgbench_clients {
        progress.note(&format!(
            "pgbench -i -s {} then -N -c {c} for {} s",
            spec.pgbench_scale,
            crate::pgbench::whole_secs(spec.duration)
        ));
        let tps = crate::pgbench::tps(
            target.admin()?,
            target.url(),
            c,
            spec.duration,
            spec.pgbench_scale,
        )
        .await?;
        report.pgbench_tps = Some(tps);
        report.pgbench_clients = Some(c);
        report.ratio = (tps > 0.0).then(|| report.single_per_sec / tps);
    }
    Ok(report)
}

async fn phases(
    spec: &HttpSpec,
    clients: usize,
    addr: SocketAddr,
    secret: &TokenSecret,
    stats: &Arc<drover_http::api::gather::GatherStats>,
    target: &Target,
    progress: &Progress,
) -> Result<HttpReport, BenchError> {
    let (samples, single_wall, gathered_batches) =
        single_phase(spec, clients, addr, secret, stats, progress).await?;
    let single_requests = samples.len() as u64;
    let batch = spec.batch.clamp(1, 10_000);
    let (batch_sent, batch_wall) = batch_phase(spec, batch, addr, secret, progress).await?;

    let landed: i64 = sqlx::query_scalar("SELECT count(*) FROM items WHERE lane = ANY($1)")
        .bind(vec![SINGLE_LANE.to_owned(), BATCH_LANE.to_owned()])
        .fetch_one(target.admin()?)
        .await?;
    let expected = i64::try_from(single_requests + batch_sent).unwrap_or(i64::MAX);
    if landed != expected {
        return Err(BenchError::Incomplete(format!(
            "{landed} items in the database for {expected} created answers"
        )));
    }
    Ok(HttpReport {
        target: target.describe(),
        clients,
        single_requests,
        single_per_sec: single_requests as f64 / single_wall.max(1e-9),
        single_latency: Percentiles::of(samples),
        gathered_batches,
        gathered_mean: if gathered_batches == 0 {
            0.0
        } else {
            single_requests as f64 / gathered_batches as f64
        },
        batch_items: batch_sent,
        batch,
        batch_items_per_sec: batch_sent as f64 / batch_wall.max(1e-9),
        items_landed: landed,
        pgbench_tps: None,
        pgbench_clients: None,
        ratio: None,
    })
}

/// Phase 1: `clients` keep-alive connections, all open before the clock
/// starts, each posting one item per request for `spec.duration`. Answers
/// each request's time (ms), the wall time (s) and the batches the
/// server's gatherer wrote meanwhile.
async fn single_phase(
    spec: &HttpSpec,
    clients: usize,
    addr: SocketAddr,
    secret: &TokenSecret,
    stats: &Arc<drover_http::api::gather::GatherStats>,
    progress: &Progress,
) -> Result<(Vec<f64>, f64, u64), BenchError> {
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(Client::connect(addr, secret).await?);
    }
    progress.note(&format!(
        "single: {clients} clients for {:?} on {addr}",
        spec.duration
    ));
    let batches_before = stats.batches();
    let started = Instant::now();
    let deadline = started + spec.duration;
    let mut tasks = Vec::with_capacity(clients);
    for (c, mut client) in conns.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let key = format!("bench-{c}-{n}");
                let t = Instant::now();
                let status = client.post("/v1/items", &key, single_body(c, n)).await?;
                if status != 201 {
                    return Err(BenchError::Http(format!(
                        "POST /v1/items answered {status}"
                    )));
                }
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
                n += 1;
            }
            Ok::<_, BenchError>(samples)
        }));
    }
    let mut samples = Vec::new();
    for t in tasks {
        let s = t
            .await
            .map_err(|e| BenchError::Http(format!("a client task failed: {e}")))??;
        samples.extend(s);
    }
    let single_wall = started.elapsed().as_secs_f64();
    let gathered_batches = stats.batches() - batches_before;
    Ok((samples, single_wall, gathered_batches))
}

/// Phase 2: the batch route, `spec.batch_items` items in requests of
/// `batch` shared among `spec.batch_clients` connections. Answers the
/// items sent and the wall time, s.
async fn batch_phase(
    spec: &HttpSpec,
    batch: usize,
    addr: SocketAddr,
    secret: &TokenSecret,
    progress: &Progress,
) -> Result<(u64, f64), BenchError> {
    let calls = spec.batch_items.div_ceil(batch as u64);
    progress.note(&format!(
        "batch: {} items, {batch} per request, {} clients",
        spec.batch_items, spec.batch_clients
    ));
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..spec.batch_clients.max(1) {
        conns.push(Client::connect(addr, secret).await?);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut client) in conns.into_iter().enumerate() {
        let next = next.clone();
        let total = spec.batch_items;
        tasks.push(tokio::spawn(async move {
            let mut sent = 0u64;
            loop {
                let call = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if call >= calls {
                    return Ok::<_, BenchError>(sent);
                }
                let from = call * batch as u64;
                let count = usize::try_from((total - from).min(batch as u64)).unwrap_or(batch);
                let key = format!("bench-batch-{c}-{call}");
                let status = client
                    .post("/v1/items/batch", &key, batch_body(from, count))
                    .await?;
                if status != 201 {
                    return Err(BenchError::Http(format!(
                        "POST /v1/items/batch answered {status}"
                    )));
                }
                sent += count as u64;
            }
        }));
    }
    let mut batch_sent = 0u64;
    for t in tasks {
        batch_sent += t
            .await
            .map_err(|e| BenchError::Http(format!("a batch client task failed: {e}")))??;
    }
    Ok((batch_sent, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_of_the_asked_size() {
        let v: serde_json::Value = serde_json::from_slice(&batch_body(10, 3)).unwrap_or_default();
        assert_eq!(v["items"].as_array().map(Vec::len), Some(3));
        assert_eq!(v["items"][2]["payload"]["n"], 12);
        let one: serde_json::Value = serde_json::from_slice(&single_body(1, 2)).unwrap_or_default();
        assert_eq!(one["lane"], SINGLE_LANE);
    }
}
