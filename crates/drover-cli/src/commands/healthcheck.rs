//! `drover healthcheck`: probe a worker's `/healthz` (or `/readyz`) and exit
//! 0 when it answers 200, 1 otherwise.
//!
//! It is the container image's `HEALTHCHECK`: a minimal image has no shell
//! and no curl, so the binary probes itself. It never opens the database
//! (the global `--database-url` is ignored) and speaks just enough HTTP/1.1
//! to read a status line, over plain TCP to a local listener.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{CliError, Context, parse};

/// How long the probe waits for an answer unless `--timeout` says.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

/// Arguments of `drover healthcheck`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HealthcheckArgs {
    /// The URL probed [default: http://<DROVER_METRICS_ADDR>/healthz, with an
    /// unspecified host (0.0.0.0, [::]) probed on loopback].
    #[arg(long, value_name = "http://HOST:PORT/PATH")]
    pub url: Option<String>,
    /// Probe /readyz (database reachable, migrations current, not draining)
    /// instead of /healthz; ignored when --url is given.
    #[arg(long)]
    pub ready: bool,
    /// How long to wait for the answer [default: 5s].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}

/// A parsed `http://host:port/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    authority: String,
    path: String,
}

fn target(args: &HealthcheckArgs) -> Result<Target, CliError> {
    if let Some(url) = &args.url {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| CliError::invalid("url", format!("{url:?} must start with http://")))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/healthz"),
        };
        if authority.is_empty() {
            return Err(CliError::invalid("url", format!("{url:?} names no host")));
        }
        return Ok(Target {
            authority: authority.to_owned(),
            path: path.to_owned(),
        });
    }
    let addr = match std::env::var("DROVER_METRICS_ADDR") {
        Ok(v) if !v.trim().is_empty() && v.trim() != "off" => {
            v.trim().parse::<SocketAddr>().map_err(|_| {
                CliError::invalid(
                    "DROVER_METRICS_ADDR",
                    format!("{v:?} is not host:port (e.g. 0.0.0.0:9464)"),
                )
            })?
        }
        Ok(v) if v.trim() == "off" => {
            return Err(CliError::invalid(
                "DROVER_METRICS_ADDR",
                "is off: the worker serves no /healthz to probe",
            ));
        }
        _ => drover::worker::METRICS_ADDR_DEFAULT
            .parse()
            .map_err(|_| CliError::invalid("DROVER_METRICS_ADDR", "default does not parse"))?,
    };
    Ok(Target {
        authority: loopback_if_unspecified(addr).to_string(),
        path: if args.ready { "/readyz" } else { "/healthz" }.to_owned(),
    })
}

/// A listener bound to every interface is probed on loopback.
fn loopback_if_unspecified(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

/// `GET path` and the status code of the answer.
async fn probe(t: &Target) -> std::io::Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(&t.authority).await?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: drover-healthcheck\r\nConnection: close\r\n\r\n",
        t.path, t.authority
    );
    s.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    // The answers are a few bytes; cap what is read from a stranger.
    s.take(64 * 1024).read_to_end(&mut answer).await?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("the answer has no HTTP status line"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Probes the worker and succeeds on 200.
///
/// # Errors
/// Exit 2 for a bad `--url`, `--timeout` or `DROVER_METRICS_ADDR`; exit 1
/// when nothing answers in time or the answer is not 200 (the status and
/// body are in the message).
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn run(args: &HealthcheckArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let t = target(args)?;
    let timeout = match &args.timeout {
        Some(v) => parse::duration("timeout", v)?,
        None => TIMEOUT_DEFAULT,
    };
    let url = format!("http://{}{}", t.authority, t.path);
    match tokio::time::timeout(timeout, probe(&t)).await {
        Err(_) => Err(unhealthy(format!("{url}: no answer within {timeout:?}"))),
        Ok(Err(e)) => Err(unhealthy(format!("{url}: {e}"))),
        Ok(Ok((200, body))) => {
            writeln!(cx.out, "{url}: 200 {body}")?;
            Ok(())
        }
        Ok(Ok((code, body))) => Err(unhealthy(format!("{url}: {code} {body}"))),
    }
}

fn unhealthy(message: String) -> CliError {
    CliError::Unhealthy(message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    #[test]
    fn url_forms_and_refusals() {
        let t = |url: &str| {
            target(&HealthcheckArgs {
                url: Some(url.into()),
                ..Default::default()
            })
        };
        assert_eq!(
            t("http://127.0.0.1:9464").expect("ok"),
            Target {
                authority: "127.0.0.1:9464".into(),
                path: "/healthz".into()
            }
        );
        assert_eq!(t("http://w:1/readyz").expect("ok").path, "/readyz");
        for bad in ["https://x:1/", "127.0.0.1:9464", "http:///healthz"] {
            let e = t(bad).expect_err("refused");
            assert_eq!(e.exit_code(), crate::EXIT_INVALID, "{bad}");
        }
    }

    #[test]
    fn unspecified_hosts_are_probed_on_loopback() {
        let a: SocketAddr = "0.0.0.0:9464".parse().expect("addr");
        assert_eq!(loopback_if_unspecified(a).to_string(), "127.0.0.1:9464");
        let a: SocketAddr = "[::]:9464".parse().expect("addr");
        assert_eq!(loopback_if_unspecified(a).to_string(), "[::1]:9464");
        let a: SocketAddr = "10.0.0.5:9464".parse().expect("addr");
        assert_eq!(loopback_if_unspecified(a), a);
    }
}
