//! Fair share over HTTP: an operator sets and clears a tenant's weight and
//! turns a lane off and on; the listing shows each tenant's share; a viewer
//! and a tenant-scoped token may not change them, a scoped one may not
//! read them; a bad weight or tenant is the caller's 400.

use axum::http::{Method, StatusCode};
use drover_http::Role;
use serde_json::json;

use crate::common::App;

/// See the module docs.
pub async fn fairness_set_list_clear(app: &App) {
    let op = app.token(Role::Operator, None, &["*"]).await;
    let viewer = app.token(Role::Viewer, None, &[]).await;
    let scoped = app
        .token(Role::Operator, Some(uuid::Uuid::from_u128(5)), &["*"])
        .await;
    let t = "00000000-0000-0000-0000-00000000000a";
    let path = format!("/v1/fairness/tenants/{t}");
    // The listing is shared for a live interval, but a change made through
    // the server shows at once: with work in a lane, the tenant's share
    // reads weight 3 right after the PUTs and 1 right after the DELETE.
    let tenant = uuid::Uuid::parse_str(t).unwrap();
    app.queue
        .store()
        .item_insert(
            &drover::NewItem::new("shared.job", json!({}))
                .with_lane("shared")
                .with_tenant(tenant),
        )
        .await
        .unwrap();
    let weight_of = |list: &serde_json::Value| {
        list["shares"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["lane"] == "shared" && s["tenant"] == t)
            .map(|s| s["weight"].clone())
    };
    let (s, _, b) = app
        .call(
            Method::PUT,
            &path,
            Some(&op),
            Some(json!({"weight": 3})),
            &[],
        )
        .await;
    assert_eq!((s, b["weight"].as_u64()), (StatusCode::OK, Some(3)), "{b}");
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/fairness/lanes/bulk",
            Some(&op),
            Some(json!({"fair": false})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["fair"].as_bool()),
        (StatusCode::OK, Some(false)),
        "{b}"
    );
    let (s, _, list) = app
        .call(Method::GET, "/v1/fairness", Some(&viewer), None, &[])
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["lanes_off"], json!(["bulk"]), "{list}");
    assert!(list["shares"].is_array(), "{list}");
    // On by group, reported so; by group with fair off is refused.
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/fairness/lanes/shared",
            Some(&op),
            Some(json!({"fair": true, "by_group": true})),
            &[],
        )
        .await;
    assert_eq!(
        (s, b["fair"].as_bool(), b["by_group"].as_bool()),
        (StatusCode::OK, Some(true), Some(true)),
        "{b}"
    );
    let (_, _, list) = app
        .call(Method::GET, "/v1/fairness", Some(&viewer), None, &[])
        .await;
    assert_eq!(list["lanes_by_group"], json!(["shared"]), "{list}");
    let shared = list["shares"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["lane"] == "shared")
        .cloned()
        .unwrap_or_default();
    assert_eq!(shared["by_group"], json!(true), "{list}");
    let (s, _, b) = app
        .call(
            Method::PUT,
            "/v1/fairness/lanes/shared",
            Some(&op),
            Some(json!({"fair": false, "by_group": true})),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    for who in [&viewer, &scoped] {
        let (s, _, b) = app
            .call(
                Method::PUT,
                &path,
                Some(who),
                Some(json!({"weight": 2})),
                &[],
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    }
    let (s, _, b) = app
        .call(Method::GET, "/v1/fairness", Some(&scoped), None, &[])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    for (p, body) in [
        (path.as_str(), json!({"weight": 0})),
        (path.as_str(), json!({"weight": 1001})),
        (path.as_str(), json!({"w": 2})),
        ("/v1/fairness/tenants/not-a-uuid", json!({"weight": 2})),
    ] {
        let (s, _, b) = app
            .call(Method::PUT, p, Some(&op), Some(body.clone()), &[])
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{p} {body}: {b}");
    }
    let (_, _, list) = app
        .call(Method::GET, "/v1/fairness", Some(&viewer), None, &[])
        .await;
    assert_eq!(weight_of(&list), Some(json!(3)), "{list}");
    for want in [true, false] {
        let (s, _, b) = app.call(Method::DELETE, &path, Some(&op), None, &[]).await;
        assert_eq!(
            (s, b["cleared"].as_bool()),
            (StatusCode::OK, Some(want)),
            "{b}"
        );
    }
    let (_, _, list) = app
        .call(Method::GET, "/v1/fairness", Some(&viewer), None, &[])
        .await;
    assert_eq!(weight_of(&list), Some(json!(1)), "{list}");
}
