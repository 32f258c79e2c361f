//! `unique_while_active` over `POST /v1/items` (one item and a batch), and
//! the item's `result` in the answer once it is done.

use axum::http::{Method, StatusCode};
use drover_http::Role;
use serde_json::{Value, json};

use crate::common::App;

async fn post(app: &App, token: &drover_http::TokenSecret, body: Value) -> (StatusCode, Value) {
    let (s, _, b) = app
        .call(Method::POST, "/v1/items", Some(token), Some(body), &[])
        .await;
    (s, b)
}

/// While the first item of a kind and key is active, enqueueing it again
/// answers `key_exists` with that item; once it is done (with a result,
/// shown by `GET /v1/items/{id}`), the same key is inserted anew. Without
/// a key the option is refused naming it.
pub async fn unique_while_active_over_http(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let body = json!({"kind": "sync.account", "key": "sync:42", "unique_while_active": true});
    let (s, first) = post(app, &op, body.clone()).await;
    assert_eq!(
        (s, &first["result"]),
        (StatusCode::CREATED, &json!("inserted")),
        "{first}"
    );
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["item"]["active_key"], "sync:42");
    assert_eq!(first["item"]["idempotency_key"], Value::Null);
    let (s, again) = post(app, &op, body.clone()).await;
    assert_eq!(again["result"], "key_exists", "{s} {again}");
    assert_eq!(again["id"], id.as_str());

    let (s, b) = post(
        app,
        &op,
        json!({"kind": "sync.account", "unique_while_active": true}),
    )
    .await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("unique_while_active")),
        "{b}"
    );

    // A worker completes it with a result.
    let batch = app
        .queue
        .claim("default", &[], "w", std::time::Duration::from_secs(30), 1)
        .await
        .unwrap();
    let cx = batch.items.into_iter().next().expect("claimed");
    app.queue
        .complete_with(&cx, Some(&json!({"synced": 3})))
        .await
        .unwrap();
    let (s, _, shown) = app
        .call(
            Method::GET,
            &format!("/v1/items/{id}?wait=5"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{shown}");
    assert_eq!(shown["item"]["status"], "done");
    assert_eq!(shown["item"]["result"], json!({"synced": 3}));

    let (s, next) = post(app, &op, body).await;
    assert_eq!(
        (s, &next["result"]),
        (StatusCode::CREATED, &json!("inserted")),
        "{next}"
    );
    assert_ne!(next["id"], id.as_str());
}
