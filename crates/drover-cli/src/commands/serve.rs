//! `drover serve [--addr 127.0.0.1:8080]`: the HTTP API (and dashboard)
//! over the queue, until SIGTERM or SIGINT.
//!
//! Default-deny from the first start: with no token configured it binds
//! loopback only and prints a one-time admin token (held in memory, gone
//! when the process exits) to stderr, never to the log; asked to bind any
//! other address without a token it refuses to start.
//!
//! It refuses a database with no migration applied (naming `drover
//! migrate`) before it reads anything, and registers the built-in kinds
//! and the host's handlers on its queue, so `/v1/stats` and an enqueue's
//! `known_kind` know them.

use std::net::SocketAddr;

use drover_http::{ApiPrincipal, HttpConfig, Role, TokenSecret};

use crate::commands::worker::Signals;
use crate::{CliError, Context};

/// The address `serve` binds unless `--addr` says otherwise.
pub const ADDR_DEFAULT: &str = "127.0.0.1:8080";

/// Arguments of `drover serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on. A non-loopback address needs a token
    /// (`drover token create`) or the server refuses to start.
    #[arg(long, env = "DROVER_HTTP_ADDR", default_value = ADDR_DEFAULT)]
    pub addr: String,
    /// Refuse every state-changing request (403).
    #[arg(long, env = "DROVER_HTTP_READ_ONLY")]
    pub read_only: bool,
    /// The largest request body in bytes; larger ones answer 413
    /// [default: 8 MiB].
    #[arg(long, env = "DROVER_HTTP_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// The most concurrent single-item enqueues written as one batch
    /// (request gathering); 0 writes each request on its own [default: 256].
    #[arg(long)]
    pub gather_max_batch: Option<usize>,
    /// Mark the dashboard's session cookie `Secure`: set it when the
    /// server is reached over TLS (directly or behind a TLS-terminating
    /// proxy), so the browser never sends the cookie in the clear.
    #[arg(long, env = "DROVER_HTTP_SECURE_COOKIE")]
    pub secure_cookie: bool,
}

/// Refuses a database that no migration was applied to: every request
/// would fail on a missing table, and the first one (the token table's
/// read) would say so in the database's words. A database behind this
/// binary by some migrations is served (an online upgrade runs `drover
/// migrate` while the old processes keep serving), with a warning.
///
/// # Errors
/// [`CliError::Drover`] (a configuration error) naming `drover migrate`;
/// the database not answering.
async fn require_migrated(queue: &drover::Queue) -> Result<(), CliError> {
    let status = queue.migration_status().await?;
    if status.expected > 0 && status.applied == 0 {
        return Err(CliError::Drover(drover::Error::Config(
            "the database has no drover tables: run `drover migrate` first".into(),
        )));
    }
    if !status.is_current() {
        tracing::warn!(%status, "the database is behind this binary: run `drover migrate`");
    }
    Ok(())
}

/// Serves until a signal. Prints `listening on http://ADDR` on stdout once
/// bound (the actual port when `--addr` asks for port 0).
///
/// # Errors
/// A malformed address (exit 2); a non-loopback address without a token
/// (exit 2); the bind or the database failing (exit 1).
///
/// # Cancel safety
/// Dropping it closes the listener; requests in flight are cut.
pub async fn run(args: &ServeArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let addr: SocketAddr = args
        .addr
        .parse()
        .map_err(|_| CliError::invalid("addr", format!("{:?} is not HOST:PORT", args.addr)))?;
    let mut config = HttpConfig::default();
    if let Some(n) = args.max_body_bytes {
        if n == 0 {
            return Err(CliError::invalid("max_body_bytes", "must be at least 1"));
        }
        config.max_body_bytes = n;
    }
    match args.gather_max_batch {
        Some(0) => config.gather.enabled = false,
        Some(n) => config.gather.max_batch = n,
        None => {}
    }
    config.dashboard.secure_cookie = args.secure_cookie;
    let mut signals = Signals::install()?;
    let queue = cx.queue().await?;
    require_migrated(&queue).await?;
    // The builder registers each handler's kind on the queue as it is
    // added (the built-in kinds, then the host's); built (never run) with
    // the heartbeat settings as `drover schedules` builds it, it names the
    // schedules this binary declares, which the dashboard can trigger.
    let env = drover::worker::WorkerSettings::from_env()?;
    let built = cx
        .worker_builder(queue.clone())
        .settings(drover::worker::WorkerSettings {
            heartbeat_cron: env.heartbeat_cron,
            heartbeat_lane: env.heartbeat_lane,
            metrics_addr: None,
            ..drover::worker::WorkerSettings::default()
        })
        .build();
    match built {
        Ok(w) => {
            let declared = w
                .scheduler()
                .map(|s| s.schedules().to_vec())
                .unwrap_or_default();
            config.dashboard.schedules = drover_http::dashboard::ScheduleTriggers::new(declared);
        }
        Err(e) => tracing::warn!(error = %e, "the schedules of this binary are not triggerable"),
    }
    let mut auth = drover_http::tokens::auth_from_store(&queue)
        .await?
        .read_only(args.read_only);
    if !auth.is_configured() {
        if !addr.ip().is_loopback() {
            return Err(CliError::invalid(
                "addr",
                format!(
                    "{addr} is not a loopback address and no token is configured: \
                     create one with `drover token create --role admin`, or bind 127.0.0.1"
                ),
            ));
        }
        let secret = TokenSecret::generate();
        let principal = ApiPrincipal {
            token_id: uuid::Uuid::now_v7(),
            role: Role::Admin,
            tenant: None,
            enqueue: vec!["*".to_owned()],
            work: vec![],
        };
        auth = auth.with_token(&secret, principal);
        // To the terminal only: the log never carries a token.
        writeln!(
            cx.err,
            "no token configured: a one-time admin token for this process \
             (loopback only, gone when it exits):\n{}",
            secret.expose()
        )?;
    }
    let drain = config.shutdown.clone();
    let app = drover_http::router_with(queue, auth, config);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::io(format!("binding {addr}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::io("reading the bound address", e))?;
    writeln!(cx.out, "listening on http://{bound}")?;
    cx.out.flush()?;
    tracing::info!(%bound, "serving the HTTP API");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let signal = signals.recv().await;
            tracing::info!(
                signal,
                "stopping the HTTP API: finishing requests in flight"
            );
            // Long polls of HTTP workers end now (503, Retry-After) rather
            // than holding the shutdown for their whole wait.
            drain.cancel();
        })
        .await
        .map_err(|e| CliError::io("serving", e))
}
