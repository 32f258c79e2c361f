//! Dependencies and batches over HTTP: `after` in one request and in a
//! batch request with a forward reference; an unknown dependency is the
//! caller's 400 naming `after`; a dependant's dependencies read with
//! their results (404 for an unknown item); batches created, joined, sealed, listed,
//! read with members per status, finished with one callback.

use axum::http::{Method, StatusCode};
use drover_http::Role;
use serde_json::json;
use uuid::Uuid;

use crate::common::App;

pub async fn dependencies_and_batches(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let a = Uuid::now_v7();
    let b = Uuid::now_v7();
    let (s, _, body) = app
        .call(
            Method::POST,
            "/v1/items/batch",
            Some(&op),
            Some(json!({"items": [
                {"kind": "step", "id": b, "after": [a], "after_policy": "run"},
                {"kind": "step", "id": a}
            ]})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (s, _, item) = app
        .call(Method::GET, &format!("/v1/items/{b}"), Some(&op), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{item}");
    let waits = item["waiting"].as_array().expect("waiting");
    assert!(
        waits.iter().any(|w| w["reason"] == "dependencies"),
        "{item}"
    );
    assert_eq!(item["links"]["after"], json!([a]), "{item}");
    assert_eq!(item["links"]["after_policy"], "run", "{item}");
    assert_eq!(item["links"]["waiting_on"], 1, "{item}");
    let (s, _, dep) = app
        .call(Method::GET, &format!("/v1/items/{a}"), Some(&op), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{dep}");
    assert_eq!(dep["links"]["dependants"], json!([b]), "{dep}");
    assert_eq!(dep["links"]["after"], json!([]), "{dep}");

    // The dependant's worker reads what its dependency returned.
    let path = format!("/v1/items/{b}/dependencies");
    let (s, _, deps) = app.call(Method::GET, &path, Some(&op), None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{deps}");
    assert_eq!(deps["items"][0]["id"], json!(a), "{deps}");
    assert_eq!(deps["items"][0]["status"], "pending", "{deps}");
    let claimed = app
        .queue
        .claim("default", &[], "w", std::time::Duration::from_secs(30), 1)
        .await
        .expect("claim");
    assert_eq!(claimed.items[0].id(), a);
    app.queue
        .complete_with(&claimed.items[0], Some(&json!({"rows": 3})))
        .await
        .expect("complete");
    let (s, _, deps) = app.call(Method::GET, &path, Some(&op), None, &[]).await;
    assert_eq!(s, StatusCode::OK, "{deps}");
    assert_eq!(deps["items"].as_array().map(Vec::len), Some(1), "{deps}");
    assert_eq!(deps["items"][0]["status"], "done", "{deps}");
    assert_eq!(deps["items"][0]["result"], json!({"rows": 3}), "{deps}");
    let (s, _, none) = app
        .call(
            Method::GET,
            &format!("/v1/items/{a}/dependencies"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!((s, &none["items"]), (StatusCode::OK, &json!([])), "{none}");
    let unknown = format!("/v1/items/{}/dependencies", Uuid::now_v7());
    let (s, _, body) = app.call(Method::GET, &unknown, Some(&op), None, &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");

    let (s, _, body) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&op),
            Some(json!({"kind": "step", "after": [Uuid::now_v7()]})),
            &[],
        )
        .await;
    assert_eq!(
        (s, &body["field"]),
        (StatusCode::BAD_REQUEST, &json!("after")),
        "{body}"
    );

    let (s, _, batch) = app
        .call(
            Method::POST,
            "/v1/batches",
            Some(&op),
            Some(json!({"callback": "report.ready", "lane": "callbacks", "payload": {"r": 1}})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{batch}");
    assert_eq!(batch["state"], "open");
    let id = batch["id"].as_str().expect("id").to_owned();
    let (s, _, member) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&op),
            Some(json!({"kind": "step", "lane": "members", "batch": id})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{member}");
    let member = member["id"].as_str().expect("id").to_owned();
    let (s, _, sealed) = app
        .call(
            Method::POST,
            &format!("/v1/batches/{id}/seal"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(
        (s, &sealed["state"]),
        (StatusCode::OK, &json!("sealed")),
        "{sealed}"
    );
    let (s, _, page) = app
        .call(Method::GET, "/v1/batches", Some(&op), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(
        page["batches"]
            .as_array()
            .expect("batches")
            .iter()
            .any(|b| b["id"] == id.as_str()),
        "{page}"
    );
    let (s, _, one) = app
        .call(
            Method::GET,
            &format!("/v1/batches/{id}"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["members"]["pending"], 1, "{one}");
    let (s, _, _) = app
        .call(
            Method::POST,
            &format!("/v1/items/{member}/cancel"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, _, one) = app
        .call(
            Method::GET,
            &format!("/v1/batches/{id}"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(one["state"], "finished", "{one}");
    assert_eq!(one["cancelled"], 1, "{one}");
    let cb = one["callback_id"].as_str().expect("callback id");
    let (s, _, cb) = app
        .call(
            Method::GET,
            &format!("/v1/items/{cb}"),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{cb}");
    assert_eq!(cb["item"]["kind"], "report.ready", "{cb}");

    let (s, _, _) = app
        .call(
            Method::GET,
            &format!("/v1/batches/{}", Uuid::now_v7()),
            Some(&op),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
