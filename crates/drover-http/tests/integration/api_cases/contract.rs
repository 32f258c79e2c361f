//! The contract cases: what the OpenAPI document promises about bodies,
//! payloads and `Idempotency-Key`, held on every backend.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{PROBLEM, ct};
use crate::common::App;

/// `payload` is any JSON value: null, omitted, an array, a string, a
/// number, a boolean or an object is accepted and given back as sent.
pub async fn contract_payload_is_any_json_value(app: &App) {
    let t = &app.admin;
    let cases = [
        (json!({"kind": "any.payload"}), Value::Null),
        (json!({"kind": "any.payload", "payload": null}), Value::Null),
        (
            json!({"kind": "any.payload", "payload": [1, "two", null]}),
            json!([1, "two", null]),
        ),
        (
            json!({"kind": "any.payload", "payload": "text"}),
            json!("text"),
        ),
        (json!({"kind": "any.payload", "payload": 42.5}), json!(42.5)),
        (
            json!({"kind": "any.payload", "payload": false}),
            json!(false),
        ),
        (
            json!({"kind": "any.payload", "payload": {"a": {"b": []}}}),
            json!({"a": {"b": []}}),
        ),
    ];
    for (body, payload) in &cases {
        let (s, _, b) = app
            .call(Method::POST, "/v1/items", Some(t), Some(body.clone()), &[])
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}: {b}");
        assert_eq!(&b["item"]["payload"], payload, "{body}: {b}");
        let id = b["id"].as_str().unwrap();
        let (s, _, one) = app
            .call(Method::GET, &format!("/v1/items/{id}"), Some(t), None, &[])
            .await;
        assert_eq!((s, &one["item"]["payload"]), (StatusCode::OK, payload));
    }
    let (s, _, page) = app
        .call(
            Method::GET,
            "/v1/items?kind=any.payload",
            Some(t),
            None,
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        page["items"].as_array().unwrap().len(),
        cases.len(),
        "{page}"
    );
}

/// A body is one JSON value and nothing after it: trailing garbage is
/// refused with a problem naming `body` on every route that reads one;
/// trailing whitespace is not garbage. Integers are JSON Schema integers:
/// `3.0` is 3, `3.5` is refused naming the member.
pub async fn contract_bodies_are_parsed_strictly(app: &App) {
    let t = &app.admin;
    let garbage: [(Method, &str, &str); 5] = [
        (Method::POST, "/v1/items", r#"{"kind": "k"} x"#),
        (Method::POST, "/v1/items", r#"{"kind": "k"}{"kind": "k"}"#),
        (
            Method::POST,
            "/v1/items/batch",
            r#"{"items": [{"kind": "k"}]},"#,
        ),
        (
            Method::POST,
            "/v1/items/bulk",
            r#"{"action": "cancel", "preview": true}]"#,
        ),
        (
            Method::PUT,
            "/v1/limits/kind/strict",
            r#"{"concurrency": 2} 1"#,
        ),
    ];
    for (method, path, body) in garbage {
        let (s, h, b) = app
            .call_raw(
                method.clone(),
                path,
                Some(t),
                Some(body.as_bytes().to_vec()),
                &[],
            )
            .await;
        assert_eq!(
            (s, ct(&h), b["field"].as_str()),
            (StatusCode::BAD_REQUEST, PROBLEM, Some("body")),
            "{method} {path} {body}: {b}"
        );
    }
    let (s, _, page) = app
        .call(Method::GET, "/v1/items?kind=k", Some(t), None, &[])
        .await;
    assert_eq!(
        (s, page["items"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
    let (s, _, b) = app
        .call_raw(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(b"{\"kind\": \"k\", \"max_attempts\": 3.0, \"priority\": -2.0} \r\n\t ".to_vec()),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(
        (
            b["item"]["max_attempts"].as_i64(),
            b["item"]["priority"].as_i64()
        ),
        (Some(3), Some(-2))
    );
    for (member, value) in [("max_attempts", json!(3.5)), ("priority", json!(40000))] {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(t),
                Some(json!({"kind": "k", member: value})),
                &[],
            )
            .await;
        assert_eq!(
            (s, b["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(member)),
            "{b}"
        );
    }
    let (s, _, b) = app
        .call(
            Method::POST,
            "/v1/items/bulk",
            Some(t),
            Some(json!({"action": "cancel", "preview": true, "max": 2.0})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

/// The idempotency fingerprint is over the body's canonical JSON: the
/// same JSON with members in another order and other spacing replays the
/// first answer; another value is 422. The key is 1 to 255 bytes of
/// visible ASCII or space; quotes around a non-empty key are dropped.
pub async fn contract_idempotency_fingerprint_is_canonical_json(app: &App) {
    let t = &app.admin;
    let first = br#"{"kind":"canon","payload":{"a":1,"b":[{"x":1,"y":"z"}]},"priority":3}"#;
    let again = b"{ \"priority\": 3,\n  \"payload\": {\"b\": [{\"y\": \"z\", \"x\": 1}], \"a\": 1},\n  \"kind\": \"canon\" }";
    let key = [("idempotency-key", "canon-1")];
    let (s1, _, b1) = app
        .call_raw(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(first.to_vec()),
            &key,
        )
        .await;
    assert_eq!(s1, StatusCode::CREATED, "{b1}");
    let (s2, h2, b2) = app
        .call_raw(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(again.to_vec()),
            &key,
        )
        .await;
    assert_eq!(
        (s2, &b2),
        (StatusCode::CREATED, &b1),
        "same JSON, same request"
    );
    assert_eq!(h2.get("idempotent-replayed").unwrap(), "true");
    let quoted = [("idempotency-key", "\"canon-1\"")];
    let (s3, h3, _) = app
        .call_raw(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(again.to_vec()),
            &quoted,
        )
        .await;
    assert_eq!(s3, StatusCode::CREATED);
    assert_eq!(h3.get("idempotent-replayed").unwrap(), "true", "\"k\" is k");
    let other = br#"{"kind":"canon","payload":{"a":2,"b":[{"x":1,"y":"z"}]},"priority":3}"#;
    let (s, _, b) = app
        .call_raw(
            Method::POST,
            "/v1/items",
            Some(t),
            Some(other.to_vec()),
            &key,
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    // The batch route too.
    let batch_key = [("idempotency-key", "canon-batch")];
    let (s, _, b) = app
        .call_raw(
            Method::POST,
            "/v1/items/batch",
            Some(t),
            Some(br#"{"items":[{"kind":"canon","lane":"default","priority":1}]}"#.to_vec()),
            &batch_key,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let (s, h, _) = app
        .call_raw(
            Method::POST,
            "/v1/items/batch",
            Some(t),
            Some(br#"{"items":[{"priority":1,"kind":"canon","lane":"default"}]}"#.to_vec()),
            &batch_key,
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(h.get("idempotent-replayed").unwrap(), "true");
    // Keys as the document's schema says: 1 to 255 bytes of [ -~].
    let long = "k".repeat(256);
    for bad in ["", long.as_str(), "tab\there"] {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(t),
                Some(json!({"kind": "canon"})),
                &[("idempotency-key", bad)],
            )
            .await;
        assert_eq!(
            (s, b["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("Idempotency-Key")),
            "{bad:?}: {b}"
        );
    }
    let edge = "k".repeat(255);
    for good in ["\"\"", " spaced ~ key ", edge.as_str()] {
        let (s, _, b) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(t),
                Some(json!({"kind": "canon"})),
                &[("idempotency-key", good)],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{good:?}: {b}");
    }
}

/// A problem names the request's own member, in a batch under its index:
/// a bad lane, group, key or payload of item 1 is `items[1].lane` (and so
/// on), the item's key is `key` (the store calls it `idempotency_key`),
/// and nothing of the batch is written. Found by the conformance suite
/// (crates/drover-http/conformance), where a batch's bad lane named `lane`.
pub async fn contract_problems_name_the_request_member(app: &App) {
    let t = &app.admin;
    let bad = [
        (json!({"kind": "named.k", "lane": "Bad Lane"}), "lane"),
        (json!({"kind": "named.k", "group": "Bad Group"}), "group"),
        (json!({"kind": "named.k", "key": "a\u{1}b"}), "key"),
        (
            json!({"kind": "named.k", "payload": {"a": "\u{0}"}}),
            "payload",
        ),
    ];
    for (item, member) in &bad {
        let (s, h, b) = app
            .call(Method::POST, "/v1/items", Some(t), Some(item.clone()), &[])
            .await;
        assert_eq!(
            (s, b["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(*member)),
            "{item}: {b}"
        );
        assert_eq!(ct(&h), PROBLEM);
        let batch = json!({"items": [{"kind": "named.k"}, item]});
        let (s, h, b) = app
            .call(Method::POST, "/v1/items/batch", Some(t), Some(batch), &[])
            .await;
        let want = format!("items[1].{member}");
        assert_eq!(
            (s, b["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(want.as_str())),
            "{item}: {b}"
        );
        assert_eq!(ct(&h), PROBLEM);
    }
    let (s, _, page) = app
        .call(Method::GET, "/v1/items?kind=named.k", Some(t), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["items"].as_array().unwrap().len(), 0, "{page}");
}
