//! The contract the OpenAPI document states, held against the server:
//! the document is served without a token and names its server (and
//! prefix); every operation lists the answers every route can give with
//! the problem schema; the request head's limits answer problems (414,
//! 431); and the schemas say what the handlers accept (payload any JSON,
//! an optional string `Idempotency-Key`, bounds, enums). The behavioural
//! side of the last is in `api_cases/contract.rs` (every backend) and the
//! schemathesis run in `drover-cli/tests/integration/serve_cli.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use common::send;

const PROBLEM: &str = "application/problem+json";

fn doc() -> Value {
    serde_json::to_value(drover_http::api::openapi()).unwrap()
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            out.push((path.clone(), method.clone(), op.clone()));
        }
    }
    out
}

#[test]
fn every_operation_lists_the_shared_answers_as_problems() {
    let doc = doc();
    assert_eq!(doc["servers"][0]["url"], "/", "{}", doc["servers"]);
    for (path, method, op) in operations(&doc) {
        let responses = op["responses"].as_object().unwrap();
        let mut expect = vec!["414", "431"];
        if !drover_http::auth::OPEN_PATHS.contains(&path.as_str()) {
            expect.extend(["401", "500", "503"]);
        }
        if op.get("requestBody").is_some() {
            expect.push("413");
        }
        for status in expect {
            assert!(
                responses.contains_key(status),
                "{method} {path} lists {status}"
            );
        }
        for (status, r) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    r["content"][PROBLEM]["schema"]["$ref"], "#/components/schemas/Problem",
                    "{method} {path} {status} is a problem"
                );
            }
        }
        for p in op["parameters"].as_array().into_iter().flatten() {
            if p["name"] == "Idempotency-Key" {
                assert_eq!(p["required"], false, "{method} {path}");
                assert_eq!(
                    p["schema"],
                    json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"}),
                    "{method} {path}: an optional string, never null"
                );
            }
        }
    }
    assert!(
        doc["paths"]["/v1/openapi.json"]["get"]
            .get("security")
            .is_none(),
        "the document is open"
    );
}

#[test]
fn schemas_say_what_the_handlers_accept() {
    let doc = doc();
    let s = &doc["components"]["schemas"];
    let enqueue = &s["EnqueueRequest"]["properties"];
    assert!(
        enqueue["payload"].get("type").is_none(),
        "payload is any JSON value: {}",
        enqueue["payload"]
    );
    assert!(s["ItemView"]["properties"]["payload"].get("type").is_none());
    assert_eq!(
        (
            enqueue["priority"]["minimum"].as_i64(),
            enqueue["priority"]["maximum"].as_i64()
        ),
        (Some(-32768), Some(32767))
    );
    assert_eq!(enqueue["max_attempts"]["minimum"], 1);
    assert_eq!(enqueue["kind"]["pattern"], "^[a-z0-9_.:-]{1,128}$");
    assert_eq!(s["BatchRequest"]["properties"]["items"]["maxItems"], 10000);
    assert_eq!(
        (
            s["BulkRequest"]["properties"]["max"]["minimum"].as_i64(),
            s["BulkRequest"]["properties"]["max"]["maximum"].as_i64()
        ),
        (Some(1), Some(10000))
    );
    let names = |schema: &str| -> Vec<String> {
        s[schema]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let statuses: Vec<String> = drover::Status::ALL
        .iter()
        .map(|st| st.as_str().to_owned())
        .collect();
    assert_eq!(names("ItemStatus"), statuses);
    assert_eq!(
        s["ItemView"]["properties"]["status"]["$ref"],
        "#/components/schemas/ItemStatus"
    );
    assert_eq!(
        names("WorkerState"),
        ["running", "draining", "offline", "lost"]
    );
    assert_eq!(
        names("InsertOutcome"),
        ["inserted", "id_exists", "key_exists", "id_taken"]
    );
    let orch: Vec<String> = drover::orchestration::OrchestrationStatus::ALL
        .iter()
        .map(|o| {
            serde_json::to_value(o)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(names("OrchestrationState"), orch);
    for (path, method, name, min, max) in [
        ("/v1/items", "get", "limit", 1, 500),
        ("/v1/orchestrations", "get", "limit", 1, 500),
    ] {
        let p = doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap();
        assert_eq!(
            (
                p["schema"]["minimum"].as_i64(),
                p["schema"]["maximum"].as_i64()
            ),
            (Some(min), Some(max)),
            "{path} {name}"
        );
    }
    // Absent, never null, in answers.
    assert_eq!(s["ItemPage"]["properties"]["next_cursor"]["type"], "string");
    assert_eq!(s["Problem"]["properties"]["detail"]["type"], "string");
}

#[tokio::test]
async fn the_document_is_open_and_names_its_prefix() {
    let app = common::memory().await;
    let (s, _, d) = send(
        &app.router,
        Method::GET,
        "/v1/openapi.json",
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(d, doc(), "the served document is the generated one");
    let nested = axum::Router::new().nest("/ops", app.router.clone());
    let (s, _, d) = send(
        &nested,
        Method::GET,
        "/ops/v1/openapi.json",
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(
        (s, d["servers"][0]["url"].as_str()),
        (StatusCode::OK, Some("/ops"))
    );
    // Open to read, and no more: the rest still needs the token.
    let (s, _, _) = send(&app.router, Method::GET, "/v1/items", None, None, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    app.finish().await;
}

#[tokio::test]
async fn an_oversized_head_answers_a_problem() {
    let app = common::memory().await;
    let long = format!(
        "/v1/items?error={}",
        "e".repeat(drover_http::head::MAX_URI_BYTES)
    );
    for token in [None, Some(&app.admin)] {
        let (s, h, b) = send(&app.router, Method::GET, &long, token, None, &[]).await;
        assert_eq!(s, StatusCode::URI_TOO_LONG);
        assert_eq!(h["content-type"], PROBLEM);
        assert_eq!(b["status"], 414, "{b}");
    }
    let big = "v".repeat(drover_http::head::MAX_HEADER_BYTES);
    let (s, h, b) = send(
        &app.router,
        Method::GET,
        "/v1/items",
        Some(&app.admin),
        None,
        &[("x-big", &big)],
    )
    .await;
    assert_eq!(
        (s, h["content-type"].to_str().unwrap()),
        (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, PROBLEM)
    );
    assert_eq!(b["status"], 431, "{b}");
    let names: Vec<String> = (0..drover_http::head::MAX_HEADER_FIELDS)
        .map(|i| format!("x-h{i}"))
        .collect();
    let many: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    let (s, _, b) = send(
        &app.router,
        Method::GET,
        "/v1/items",
        Some(&app.admin),
        None,
        &many,
    )
    .await;
    assert_eq!(
        (s, b["status"].as_u64()),
        (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, Some(431))
    );
    // Just inside the limits: served.
    let fits = format!(
        "/v1/items?error={}",
        "e".repeat(drover_http::head::MAX_URI_BYTES - 20)
    );
    let (s, _, b) = send(
        &app.router,
        Method::GET,
        &fits,
        Some(&app.admin),
        None,
        &many[..40],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    app.finish().await;
}
