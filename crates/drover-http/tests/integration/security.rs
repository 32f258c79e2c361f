//! Security: default-deny (every route of the OpenAPI document but the
//! open ones (the probes and the document itself), every method, and
//! unknown paths answer no 2xx without credentials), tenant
//! isolation enforced by PostgreSQL's RLS through the runtime role (checked
//! with raw SQL). The logs are checked in `logs.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use axum::http::{Method, StatusCode};
use drover_http::Role;
use serde_json::json;
use sqlx::Connection;

use common::{App, send};

/// Every path the API documents, with its parameters filled, and a few it
/// does not.
fn probes() -> Vec<(Method, String)> {
    let spec = serde_json::to_value(drover_http::api::openapi()).unwrap();
    let id = uuid::Uuid::now_v7();
    let mut out = Vec::new();
    for (path, ops) in spec["paths"].as_object().unwrap() {
        let path = path
            .replace("{id}", &id.to_string())
            .replace("{lane}", "default");
        for method in ops.as_object().unwrap().keys() {
            out.push((
                method.to_uppercase().parse::<Method>().unwrap(),
                path.clone(),
            ));
        }
        for m in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
        ] {
            out.push((m, path.clone()));
        }
    }
    for extra in [
        "/",
        "/v1",
        "/v1/",
        "/healthz/",
        "/readyz/x",
        "/HEALTHZ",
        "/v1/tokens",
        "/dashboard",
        "/x/../v1/items",
    ] {
        out.push((Method::GET, extra.to_owned()));
        out.push((Method::POST, extra.to_owned()));
    }
    out
}

#[tokio::test]
async fn every_route_without_credentials_answers_no_2xx() {
    let app = common::sqlite().await;
    let probes = probes();
    assert!(probes.len() > 60, "the document lists the routes");
    let bad = drover_http::TokenSecret::generate();
    for (method, path) in &probes {
        let open = drover_http::auth::OPEN_PATHS.contains(&path.as_str());
        for token in [None, Some(&bad)] {
            let body = matches!(*method, Method::POST | Method::PUT | Method::PATCH).then(|| {
                serde_json::to_vec(
                    &json!({"kind": "x", "items": [{"kind": "x"}], "action": "cancel"}),
                )
                .unwrap()
            });
            let (s, h, _) = send(&app.router, method.clone(), path, token, body, &[]).await;
            if open && *method == Method::GET {
                assert_eq!(s, StatusCode::OK, "{method} {path}");
                continue;
            }
            assert!(
                !s.is_success(),
                "{method} {path} with {token:?} answered {s}"
            );
            if !open {
                assert_eq!(s, StatusCode::UNAUTHORIZED, "{method} {path}");
                assert!(h.get("www-authenticate").is_some());
            }
        }
    }
    // A scheme other than Bearer, or an empty token, is no credential.
    for auth in ["Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", "bearer x"] {
        let req = axum::http::Request::builder()
            .uri("/v1/items")
            .header("authorization", auth)
            .body(axum::body::Body::empty())
            .unwrap();
        let res = tower::ServiceExt::oneshot(app.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{auth}");
    }
    // A revoked token stops working at once.
    let (s, _, _) = app
        .call(Method::GET, "/v1/items", Some(&app.admin), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK);
    let admin_id = app.queue.store().token_list().await.unwrap()[0].id;
    assert!(app.queue.store().token_revoke(admin_id).await.unwrap());
    let (s, _, _) = app
        .call(Method::GET, "/v1/items", Some(&app.admin), None, &[])
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    app.finish().await;
}

/// Tenant A's token reads none of tenant B's items; the raw SQL shows B's
/// items exist, and that the runtime role with tenant A set sees none of
/// them (RLS, not handler code).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenant_a_token_reads_none_of_tenant_b_enforced_by_rls() {
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let harness = drover::store::contract::Harness {
        store: store.clone(),
        clock: None,
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    };
    let app = App::over(harness).await;
    let (a, b) = (uuid::Uuid::from_u128(0xAAA), uuid::Uuid::from_u128(0xBBB));
    let ta = app.token(Role::Admin, Some(a), &["*"]).await;
    let tb = app.token(Role::Admin, Some(b), &["*"]).await;
    for i in 0..5 {
        let (s, _, _) = app
            .call(
                Method::POST,
                "/v1/items",
                Some(&tb),
                Some(json!({"kind": "b.secret", "payload": {"i": i}})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (s, _, _) = app
        .call(
            Method::POST,
            "/v1/items",
            Some(&ta),
            Some(json!({"kind": "a.own"})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, _, page) = app
        .call(Method::GET, "/v1/items?limit=500", Some(&ta), None, &[])
        .await;
    let seen: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["tenant_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        seen,
        [a.to_string()],
        "tenant A's token lists its own item only"
    );
    let (_, _, page) = app
        .call(
            Method::GET,
            &format!("/v1/items?tenant={b}"),
            Some(&ta),
            None,
            &[],
        )
        .await;
    assert_eq!(page["status"], 403);

    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let total_b: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{schema}\".items WHERE tenant_id = $1"
    ))
    .bind(b)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(total_b, 5, "tenant B's items exist");
    let roles = store.roles().await.unwrap().clone();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query(&format!("SET LOCAL ROLE \"{}\"", roles.runtime))
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(&format!("SET LOCAL drover.tenant_id = '{a}'"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let visible_b: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{schema}\".items WHERE tenant_id = $1"
    ))
    .bind(b)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(
        visible_b, 0,
        "RLS hides tenant B's rows from the runtime role under tenant A"
    );
    let tokens =
        sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM \"{schema}\".api_tokens"))
            .fetch_one(&mut *tx)
            .await;
    assert!(
        tokens.is_err(),
        "the runtime role cannot read the token table"
    );
    tx.rollback().await.unwrap();
    conn.close().await.unwrap();
    drover::testing::pg_drop_schema(&url, &schema).await;
}
