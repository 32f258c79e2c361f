//! The committed OpenAPI document (`openapi.json` at the crate root) is the
//! one the handlers generate: this test fails when they drift. Regenerate
//! with `DROVER_WRITE_OPENAPI=1 cargo test -p drover-http --test integration openapi::`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn committed_spec_matches_the_generated_one() {
    let generated = drover_http::api::openapi().to_pretty_json().unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    if std::env::var_os("DROVER_WRITE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi.json differs from the document the handlers generate; \
         regenerate it with DROVER_WRITE_OPENAPI=1 cargo test -p drover-http --test integration openapi::"
    );
    let v: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert!(v["openapi"].as_str().unwrap().starts_with("3.1"));
    for p in [
        "/v1/items",
        "/v1/items/batch",
        "/v1/items/bulk",
        "/v1/items/{id}",
        "/v1/items/{id}/retry",
        "/v1/items/{id}/cancel",
        "/v1/lanes",
        "/v1/workers",
        "/v1/stats",
        "/v1/schedules",
        "/v1/orchestrations",
        "/v1/openapi.json",
        "/healthz",
        "/readyz",
    ] {
        assert!(v["paths"].get(p).is_some(), "{p} is documented");
    }
}

/// docs/http.md's routes table names every route the document has, as
/// "`METHOD /path`" (it once left out pause and resume), and promises no
/// token management over HTTP, which no route offers.
#[test]
fn the_routes_table_names_every_documented_route() {
    let spec = serde_json::to_value(drover_http::api::openapi()).unwrap();
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/http.md"),
    )
    .unwrap();
    let table = &doc[doc.find("## Routes").unwrap()..];
    let mut missing = Vec::new();
    for (path, ops) in spec["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let route = format!("`{} {path}`", method.to_uppercase());
            if !table.contains(&route) {
                missing.push(route);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/http.md's routes table lacks {missing:?}"
    );
    assert!(
        !spec["paths"]
            .as_object()
            .unwrap()
            .keys()
            .any(|p| p.contains("token")),
        "no route manages tokens"
    );
    assert!(
        !doc.contains("admin also manages tokens"),
        "the roles row promises token management over HTTP"
    );
}
