//! Shared helpers of the HTTP API tests: an app over a fresh store of each
//! backend with tokens minted through the token table, and a request helper
//! that drives the router in process (the same service `drover serve` runs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use drover::Queue;
use drover::store::contract::Harness;
use drover_http::tokens::{self, TokenGrant};
use drover_http::{Role, TokenSecret};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use uuid::Uuid;

/// An app over a fresh store, and the harness to clean up.
pub struct App {
    pub router: Router,
    pub queue: Queue,
    pub admin: TokenSecret,
    pub harness: Harness,
}

impl App {
    /// An app over `harness`'s store, with an unscoped admin token that may
    /// enqueue every kind.
    pub async fn over(harness: Harness) -> App {
        let queue = Queue::new(harness.store.clone());
        let admin = mint(&queue, Role::Admin, None, &["*"]).await;
        let auth = tokens::auth_from_store(&queue).await.expect("auth");
        assert!(auth.is_configured());
        App {
            router: drover_http::router(queue.clone(), auth),
            queue,
            admin,
            harness,
        }
    }

    /// Mints another token on this app's store (seen at once: the
    /// middleware asks the table on every request).
    pub async fn token(&self, role: Role, tenant: Option<Uuid>, enqueue: &[&str]) -> TokenSecret {
        mint(&self.queue, role, tenant, enqueue).await
    }

    /// Sends a request; answers the status, headers and JSON body (Null
    /// when empty or not JSON).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&TokenSecret>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Value) {
        let raw = body.map(|b| serde_json::to_vec(&b).unwrap());
        self.call_raw(method, uri, token, raw, headers).await
    }

    /// As [`App::call`] with a raw body.
    pub async fn call_raw(
        &self,
        method: Method,
        uri: &str,
        token: Option<&TokenSecret>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Value) {
        send(&self.router, method, uri, token, body, headers).await
    }

    pub async fn finish(self) {
        self.harness.finish().await;
    }
}

/// Sends one request to `router`.
pub async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    token: Option<&TokenSecret>,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {}", t.expose()));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(body.map_or_else(Body::empty, Body::from)).unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, value)
}

pub async fn mint(
    queue: &Queue,
    role: Role,
    tenant: Option<Uuid>,
    enqueue: &[&str],
) -> TokenSecret {
    let (secret, _) = tokens::create(
        queue,
        &TokenGrant {
            role,
            tenant,
            enqueue: enqueue.iter().map(|s| (*s).to_owned()).collect(),
            label: "test".into(),
            work: vec![],
        },
    )
    .await
    .expect("token");
    secret
}

pub async fn sqlite() -> App {
    App::over(drover::store::sqlite::sqlite_harness().await).await
}

pub async fn postgres() -> App {
    App::over(drover::testing::pg_harness().await).await
}

pub async fn memory() -> App {
    App::over(Harness {
        store: std::sync::Arc::new(drover::store::memory::MemoryStore::new()),
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    })
    .await
}
