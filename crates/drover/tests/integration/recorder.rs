//! The process's metrics recorder, for the modules that read what drover
//! counted. A process has one global recorder: under nextest every test is
//! a process of its own, but under `cargo test` this binary's tests share
//! one, so each reader takes this recorder rather than installing its own
//! (a second install fails).

#![allow(clippy::expect_used)]

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The Prometheus recorder, installed as the process's global one on first use.
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("no other global recorder in this binary")
    })
}
