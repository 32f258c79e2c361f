//! No token or token hash appears in the logs at any level: every log line
//! of a run that mints tokens, authenticates with good and bad ones, and
//! writes with Idempotency-Key is captured at TRACE and searched. Refusals
//! for a credential are logged (an API 401, a failed dashboard login), at
//! `warn`, without the token.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::Method;
use drover_http::Role;
use serde_json::json;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_hash_in_the_logs_at_any_level() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // The process-wide subscriber, so every task and thread of this test
    // logs into the capture. Under nextest the test is a process of its
    // own; under `cargo test` the binary's other tests log into it too,
    // which only adds lines (their tokens are not this test's secrets).
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let app = common::sqlite().await;
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let wrong = drover_http::TokenSecret::generate();
    let mut secrets = vec![app.admin.clone(), viewer.clone(), wrong.clone()];
    for t in [&app.admin, &viewer, &wrong] {
        let _ = app.call(Method::GET, "/v1/items", Some(t), None, &[]).await;
        let _ = app
            .call(
                Method::POST,
                "/v1/items",
                Some(t),
                Some(json!({"kind": "k"})),
                &[("idempotency-key", "log-test")],
            )
            .await;
        let _ = app
            .call(
                Method::POST,
                "/v1/items/bulk",
                Some(t),
                Some(json!({"action": "cancel"})),
                &[],
            )
            .await;
        let _ = app
            .call(Method::GET, "/v1/nowhere", Some(t), None, &[])
            .await;
    }
    let _ = app.call(Method::GET, "/v1/items", None, None, &[]).await;
    let login = axum::http::Request::post("/ui/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(axum::body::Body::from(format!("token={}", wrong.expose())))
        .unwrap();
    let res = tower::ServiceExt::oneshot(app.router.clone(), login)
        .await
        .unwrap();
    assert_eq!(res.status(), axum::http::StatusCode::UNAUTHORIZED);
    secrets.push(app.token(Role::Admin, None, &["*"]).await);
    tracing::trace!(auth = ?drover_http::Auth::deny_all().with_token(&wrong, drover_http::ApiPrincipal {
        token_id: uuid::Uuid::nil(), role: Role::Admin, tenant: None, enqueue: vec![], work: vec![] }), "auth state");
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("API token created"),
        "the capture saw the logs: {text}"
    );
    for (line, what) in [
        ("why=\"no bearer token\"", "a request without a token"),
        (
            "why=\"the token is unknown or revoked\"",
            "a request with a wrong token",
        ),
        ("dashboard login refused", "a failed dashboard login"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(" WARN ") && l.contains(line)),
            "{what} is logged at warn: {text}"
        );
    }
    for s in &secrets {
        assert!(!text.contains(s.expose()), "a token appears in the logs");
        assert!(
            !text.contains(&s.hash().to_hex()),
            "a token hash appears in the logs"
        );
        // Nor its random part without the prefix.
        assert!(!text.contains(&s.expose()[drover_http::auth::TOKEN_PREFIX.len()..]));
    }
    app.finish().await;
}
