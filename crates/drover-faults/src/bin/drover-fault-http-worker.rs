//! The fault suite's HTTP worker process (see `drover_faults::http_worker`).

use std::process::ExitCode;

fn main() -> ExitCode {
    drover_cli::init_tracing();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(drover_faults::http_worker::main(
        std::env::args_os().collect(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "fault HTTP worker failed");
            ExitCode::from(1)
        }
    }
}
