//! The span one run of an item is recorded under.
//!
//! It is a root span (`parent: None`): the item outlives the request that
//! caused it, so the run starts a trace of its own, and with feature `otel`
//! it carries one span link to the item's `traceparent` instead
//! ([`crate::otel`]). Without the feature the span is a plain `tracing`
//! span whose fields name the item; nothing more is done per run.

use tracing::Span;

use crate::queue::JobContext;

/// Opens the span of one run of `cx`.
pub(crate) fn run_span(cx: &JobContext) -> Span {
    let span = tracing::info_span!(
        parent: None,
        "drover.item",
        otel.name = %format_args!("process {}", cx.lane()),
        otel.kind = "consumer",
        messaging.system = "drover",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = cx.lane(),
        messaging.message.id = %cx.id(),
        drover.kind = cx.kind(),
        drover.tenant = %cx.tenant(),
        drover.attempt = cx.attempt(),
        drover.fencing_token = cx.fencing_token(),
        drover.request_id = tracing::field::Empty,
    );
    if let Some(r) = cx.request_id() {
        span.record("drover.request_id", r);
    }
    #[cfg(feature = "otel")]
    crate::otel::link_run(&span, cx.traceparent());
    span
}
