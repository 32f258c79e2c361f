//! `drover serve [--addr 127.0.0.1:8080]`: the HTTP API (and dashboard)
//! over the queue, until SIGTERM or SIGINT.
//!
//! Default-deny from the first start: with no token configured it binds
//! loopback only and prints a one-time admin token (held in memory, gone
//! when the process exits) to stderr, never to the log; asked to bind any
//! other address without a token it refuses to start.

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
    let mut signals = Signals::install()?;
    let queue = cx.queue().await?;
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
        })
        .await
        .map_err(|e| CliError::io("serving", e))
}
