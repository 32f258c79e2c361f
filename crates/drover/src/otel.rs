//! Trace links over OpenTelemetry (feature `otel`).
//!
//! An item outlives the request that caused it, so a run's span is never
//! that request's child: it starts a trace of its own and carries one
//! OpenTelemetry **span link** to the item's W3C `traceparent` (DESIGN §5).
//! The run span's attributes follow the messaging semantic conventions
//! where they fit (`messaging.system = "drover"`, `messaging.message.id`,
//! `messaging.destination.name` = the lane, `messaging.operation.type =
//! "process"`) and name the rest `drover.*` (`drover.kind`,
//! `drover.attempt`, `drover.tenant`, `drover.request_id`).
//!
//! [`init`] builds the OTLP exporter (HTTP/protobuf) the standard `OTEL_*`
//! variables configure — `OTEL_EXPORTER_OTLP_ENDPOINT` (default
//! `http://localhost:4318`), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the batch
//! processor's `OTEL_BSP_*` — and [`Otel::layer`] is the `tracing` layer
//! that turns drover's spans into OpenTelemetry spans.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # fn f() -> drover::Result<()> {
//! let otel = drover::otel::init()?; // keep it: dropping it flushes and stops the exporter
//! tracing_subscriber::registry()
//!     .with(otel.layer())
//!     .with(tracing_subscriber::fmt::layer())
//!     .init();
//! # Ok(()) }
//! ```

use opentelemetry::trace::{
    SpanContext, SpanId, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::registry::LookupSpan;

use crate::error::{Error, Result};
use crate::trace::TraceParent;

/// The instrumentation scope drover's spans are reported under.
pub const TRACER_NAME: &str = "drover";

/// The span context a stored `traceparent` names, as a remote context to
/// link to. `None` for a value that does not parse (an item stored before
/// enqueue checked the format).
pub fn span_context(traceparent: &str) -> Option<SpanContext> {
    let t = TraceParent::parse(traceparent).ok()?;
    Some(SpanContext::new(
        TraceId::from_bytes(t.trace_id),
        SpanId::from_bytes(t.span_id),
        TraceFlags::new(t.flags),
        true,
        TraceState::default(),
    ))
}

/// What a run's exported span says about the item: its attributes and the
/// trace context it links to.
pub(crate) struct RunAttributes<'a> {
    /// The item's lane (`messaging.destination.name`).
    pub(crate) lane: &'a str,
    /// The item's id (`messaging.message.id`).
    pub(crate) id: uuid::Uuid,
    /// Its kind.
    pub(crate) kind: &'a str,
    /// Its tenant.
    pub(crate) tenant: uuid::Uuid,
    /// The attempt this run is.
    pub(crate) attempt: i32,
    /// The claim's fencing token.
    pub(crate) fencing_token: i64,
    /// The request that caused it, if known.
    pub(crate) request_id: Option<&'a str>,
    /// The W3C `traceparent` it was enqueued under, if any.
    pub(crate) traceparent: Option<&'a str>,
}

/// Sets the run's attributes on its OpenTelemetry span (never as
/// `tracing` fields, so a log formatter does not print them on every line
/// the handler logs) and links it to the item's trace context.
pub(crate) fn describe_run(span: &tracing::Span, run: &RunAttributes<'_>) {
    span.set_attribute("messaging.system", "drover");
    span.set_attribute("messaging.operation.type", "process");
    span.set_attribute("messaging.operation.name", "process");
    span.set_attribute("messaging.destination.name", run.lane.to_owned());
    span.set_attribute("messaging.message.id", run.id.to_string());
    span.set_attribute("drover.kind", run.kind.to_owned());
    span.set_attribute("drover.tenant", run.tenant.to_string());
    span.set_attribute("drover.attempt", i64::from(run.attempt));
    span.set_attribute("drover.fencing_token", run.fencing_token);
    if let Some(r) = run.request_id {
        span.set_attribute("drover.request_id", r.to_owned());
    }
    link_run(span, run.traceparent);
}

/// Links `span` to the item's trace context, if it has a valid one.
fn link_run(span: &tracing::Span, traceparent: Option<&str>) {
    if let Some(cx) = traceparent.and_then(span_context) {
        span.add_link(cx);
    }
}

/// An OpenTelemetry tracer provider drover's spans are exported through.
/// Dropping it flushes what is buffered and shuts the exporter down.
#[derive(Debug)]
pub struct Otel {
    provider: SdkTracerProvider,
}

/// Builds the OTLP exporter the `OTEL_*` variables configure (see the
/// module docs), behind a batch span processor, and installs its provider
/// as the global one.
///
/// # Errors
/// [`Error::Config`] when the exporter cannot be built (a malformed
/// endpoint or header variable).
pub fn init() -> Result<Otel> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| Error::Config(format!("the OTLP span exporter (OTEL_* variables): {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().build())
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(Otel { provider })
}

impl Otel {
    /// Wraps a provider built elsewhere (another exporter, or an in-memory
    /// one in tests).
    pub fn from_provider(provider: SdkTracerProvider) -> Self {
        Otel { provider }
    }

    /// The `tracing` layer exporting spans through this provider.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer(TRACER_NAME))
    }

    /// The provider underneath.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

impl Drop for Otel {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "shutting the OpenTelemetry provider down");
        }
    }
}
