//! Trace links (feature `otel`, on in drover's own tests): a run's span is
//! a root of its own trace with exactly one link to the item's
//! `traceparent`, carrying the item's id, lane, kind, attempt, tenant and
//! request id.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::OnceLock;
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker, WorkerSettings};
use drover::{Status, otel::Otel};
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;
use uuid::Uuid;

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SPAN: &str = "b7ad6b7169203331";

#[derive(Debug, Serialize, Deserialize)]
struct Traced {
    n: u32,
}

impl Kind for Traced {
    const NAME: &'static str = "test.traced";
    const LANE: &'static str = "traced";
}

struct Ok1;

impl Handler for Ok1 {
    type Job = Traced;
    const STRATEGY: Strategy = Strategy {
        idempotency: "no side effects",
        retry: "queue default",
        checkpoint: "none: one step, a rerun starts over",
        recovery: "swept after the lease",
    };
    async fn handle(&self, _cx: &JobContext, _job: Traced) -> Outcome {
        Ok(Done::Completed)
    }
}

/// One in-memory exporter behind the process's global subscriber: the
/// worker's tasks run on any runtime thread, so a thread-local default
/// would miss them.
fn exporter() -> &'static (InMemorySpanExporter, Otel) {
    static EXPORTER: OnceLock<(InMemorySpanExporter, Otel)> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let otel = Otel::from_provider(provider);
        let subscriber = tracing_subscriber::registry().with(otel.layer());
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        (exporter, otel)
    })
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| &kv.value)
}

fn run_spans_of(id: Uuid) -> Vec<SpanData> {
    let (exporter, otel) = exporter();
    otel.provider().force_flush().expect("flush");
    exporter
        .get_finished_spans()
        .expect("spans")
        .into_iter()
        .filter(|s| {
            attr(s, "messaging.message.id").map(|v| v.as_str().into_owned()) == Some(id.to_string())
        })
        .collect()
}

async fn run_one(q: &Queue, principal: Principal) -> Uuid {
    let out = q
        .enqueue(Traced { n: 1 })
        .principal(principal)
        .await
        .expect("enqueue");
    let w = Worker::builder(q.clone())
        .settings(WorkerSettings {
            poll_interval: Duration::from_millis(20),
            ..WorkerSettings::default()
        })
        .lane("traced")
        .drained_elsewhere("default") // the heartbeat's
        .metrics_addr(None)
        .without_sweep()
        .handler(Ok1)
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let item = q.get(Uuid::nil(), out.item.id).await.expect("get");
        if item.status == Status::Done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "item not done: {item:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    w.shutdown().await;
    out.item.id
}

#[tokio::test]
async fn a_run_span_has_one_link_to_the_items_traceparent_and_no_parent_from_it() {
    exporter();
    let q = Queue::memory();
    let principal = Principal::system()
        .with_traceparent(format!("00-{TRACE}-{SPAN}-01"))
        .with_request("req-42");
    let id = run_one(&q, principal).await;

    let spans = run_spans_of(id);
    assert_eq!(spans.len(), 1, "one run, one span: {spans:?}");
    let span = &spans[0];
    assert_eq!(
        span.links.links.len(),
        1,
        "exactly one link: {:?}",
        span.links
    );
    let link = &span.links.links[0].span_context;
    assert_eq!(link.trace_id(), TraceId::from_hex(TRACE).unwrap());
    assert_eq!(link.span_id(), SpanId::from_hex(SPAN).unwrap());
    assert!(link.is_remote());
    // Linked, never parented: the run is the root of a trace of its own.
    assert_eq!(span.parent_span_id, SpanId::INVALID, "no parent");
    assert_ne!(
        span.span_context.trace_id(),
        TraceId::from_hex(TRACE).unwrap()
    );

    let s = |k: &str| attr(span, k).map(|v| v.as_str().into_owned());
    assert_eq!(s("messaging.system").as_deref(), Some("drover"));
    assert_eq!(s("messaging.destination.name").as_deref(), Some("traced"));
    assert_eq!(s("messaging.operation.type").as_deref(), Some("process"));
    assert_eq!(s("drover.kind").as_deref(), Some("test.traced"));
    assert_eq!(s("drover.tenant"), Some(Uuid::nil().to_string()));
    assert_eq!(s("drover.request_id").as_deref(), Some("req-42"));
    assert_eq!(attr(span, "drover.attempt"), Some(&Value::I64(1)));
}

#[tokio::test]
async fn a_run_of_an_item_without_traceparent_has_no_link() {
    exporter();
    let q = Queue::memory();
    let id = run_one(&q, Principal::system()).await;
    let spans = run_spans_of(id);
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert!(spans[0].links.links.is_empty(), "{:?}", spans[0].links);
    assert_eq!(spans[0].parent_span_id, SpanId::INVALID);
}
