//! The span one run of an item is recorded under.
//!
//! It is a root span (`parent: None`): the item outlives the request that
//! caused it, so the run starts a trace of its own, and with feature `otel`
//! it carries one span link to the item's `traceparent` instead
//! ([`crate::otel`]).
//!
//! Invariant: every line a handler logs carries this span's fields as its
//! prefix under the default `tracing_subscriber::fmt` formatter, so the span
//! holds only what a reader of that line needs: `kind` and `id`
//! (`drover.item{kind=send_welcome id=0192…}: …`). The attributes an
//! exporter wants (the messaging semantic conventions, tenant, attempt,
//! fencing token, request id) are set on the OpenTelemetry span itself with
//! feature `otel` ([`crate::otel`]), never as `tracing` fields, so no
//! formatter prints them; only the exported span's name and kind
//! (`otel.name`, `otel.kind`, which the OpenTelemetry layer reads from
//! fields alone) are fields, with that feature.

use tracing::Span;

use crate::queue::JobContext;

/// Opens the span of one run of `cx`.
pub(crate) fn run_span(cx: &JobContext) -> Span {
    #[cfg(not(feature = "otel"))]
    let span = tracing::info_span!(parent: None, "drover.item", kind = %cx.kind(), id = %cx.id());
    #[cfg(feature = "otel")]
    let span = {
        let span = tracing::info_span!(
            parent: None,
            "drover.item",
            kind = %cx.kind(),
            id = %cx.id(),
            otel.name = %format_args!("process {}", cx.lane()),
            otel.kind = "consumer",
        );
        crate::otel::describe_run(
            &span,
            &crate::otel::RunAttributes {
                lane: cx.lane(),
                id: cx.id(),
                kind: cx.kind(),
                tenant: cx.tenant(),
                attempt: cx.attempt(),
                fencing_token: cx.fencing_token(),
                request_id: cx.request_id(),
                traceparent: cx.traceparent(),
            },
        );
        span
    };
    span
}
