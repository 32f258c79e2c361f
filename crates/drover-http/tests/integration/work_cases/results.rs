//! Results, progress and the item long-poll over HTTP: an HTTP worker's
//! completion with a `result` and its progress reports show in
//! `GET /v1/items/{id}`; progress is fenced and rate-limited; the next
//! claim of a retried item carries its checkpoint; `?wait=` answers when
//! the item is final.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{WorkApp, handle, uri};

async fn get_item(w: &WorkApp, id: &str, query: &str) -> (StatusCode, Value) {
    let (s, _, b) = w
        .call(
            Method::GET,
            &format!("/v1/items/{id}{query}"),
            &w.app.admin,
            None,
        )
        .await;
    (s, b)
}

/// Progress is written fenced and at most once a second per item (429
/// inside it); a stale claim's report is 409; the checkpoint comes back
/// with the next claim after a failure; a completion's result (batch too)
/// is stored and shown with the item's progress.
pub async fn results_and_progress_over_http(w: &WorkApp) {
    w.enqueue("job.r", "jobs").await;
    let items = w.claim("w1", &["jobs"], 1, json!({})).await;
    let item = &items[0];
    let id = item["id"].as_str().unwrap().to_owned();
    assert!(item.get("progress").is_none(), "{item}");

    let mut report = handle(item);
    report["value"] = json!(40.0);
    report["data"] = json!({"cursor": 7});
    let (s, b) = w
        .post(&uri(item, "progress"), &w.worker, report.clone())
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, _, b) = w
        .call(
            Method::POST,
            &uri(item, "progress"),
            &w.worker,
            Some(report.clone()),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{b}");
    let (s, b) = get_item(w, &id, "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        b["item"]["progress"],
        json!({"value": 40.0, "data": {"cursor": 7}})
    );
    assert_eq!(b["item"]["result"], Value::Null);

    // An empty report and a huge note are refused before any write.
    let (s, b) = w
        .post(&uri(item, "progress"), &w.worker, handle(item))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");

    // Fail it: the next claim carries the checkpoint; the old token's
    // report is stale.
    let mut fail = handle(item);
    fail["error"] = json!("try again");
    let (s, b) = w.post(&uri(item, "fail"), &w.worker, fail).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // The retry's backoff passes: moved on a store clock that can be moved,
    // waited out (about a second) on PostgreSQL's.
    if let Some(clock) = &w.app.harness.clock {
        clock.advance(std::time::Duration::from_secs(3600));
    }
    let again = loop {
        let got = w.claim("w1", &["jobs"], 1, json!({})).await;
        if let Some(i) = got.into_iter().next() {
            break i;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        again["progress"],
        json!({"value": 40.0, "data": {"cursor": 7}})
    );
    tokio::time::sleep(drover::queue::PROGRESS_INTERVAL).await;
    let (s, b) = w.post(&uri(item, "progress"), &w.worker, report).await;
    assert_eq!(s, StatusCode::CONFLICT, "a stale claim's report: {b}");

    let mut done = handle(&again);
    done["result"] = json!({"rows": 3, "ok": true});
    let (s, b) = w.post(&uri(&again, "complete"), &w.worker, done).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_, b) = get_item(w, &id, "").await;
    assert_eq!(b["item"]["status"], "done");
    assert_eq!(b["item"]["result"], json!({"rows": 3, "ok": true}));

    // A batch completion carries results per item.
    w.enqueue("job.r", "jobs").await;
    w.enqueue("job.r", "jobs").await;
    let two = w.claim("w1", &["jobs"], 2, json!({})).await;
    assert_eq!(two.len(), 2);
    let entries: Vec<Value> = two
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let mut e = handle(i);
            e["id"] = i["id"].clone();
            if n == 0 {
                e["result"] = json!([n]);
            }
            e
        })
        .collect();
    let (s, b) = w
        .post("/v1/work/complete", &w.worker, json!({"items": entries}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["completed"].as_array().unwrap().len(), 2);
    let (_, first) = get_item(w, two[0]["id"].as_str().unwrap(), "").await;
    let (_, second) = get_item(w, two[1]["id"].as_str().unwrap(), "").await;
    assert_eq!(first["item"]["result"], json!([0]));
    assert_eq!(second["item"]["result"], Value::Null);
}

/// `GET /v1/items/{id}?wait=` answers at once for a final item, waits for
/// a pending one and answers when it completes (well before the bound),
/// answers with the item as it stands when the bound passes, and refuses a
/// bound over 60 s.
pub async fn long_poll_on_an_item_answers_at_completion(w: &WorkApp) {
    let id = w.enqueue("job.wait", "jobs").await.to_string();
    let (s, b) = get_item(w, &id, "?wait=61").await;
    assert_eq!(
        (s, &b["field"]),
        (StatusCode::BAD_REQUEST, &json!("wait")),
        "{b}"
    );
    let (s, b) = get_item(w, &id, "?wait=1s").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["item"]["status"], "pending", "the bound passed");

    let items = w.claim("w1", &["jobs"], 1, json!({})).await;
    let item = items[0].clone();
    let started = std::time::Instant::now();
    let poll = {
        let router = w.router.clone();
        let admin = w.app.admin.clone();
        let id = id.clone();
        tokio::spawn(async move {
            crate::common::send(
                &router,
                Method::GET,
                &format!("/v1/items/{id}?wait=30s"),
                Some(&admin),
                None,
                &[],
            )
            .await
        })
    };
    // The poll is waiting on a claimed item; complete it.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !poll.is_finished(),
        "the poll waits while the item is claimed"
    );
    let mut done = handle(&item);
    done["result"] = json!("echoed");
    let (s, b) = w.post(&uri(&item, "complete"), &w.worker, done).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, _, b) = poll.await.unwrap();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["item"]["status"], "done");
    assert_eq!(b["item"]["result"], json!("echoed"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "answered at completion, not at the bound"
    );
}
