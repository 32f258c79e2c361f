//! The fault suite's projector process (see `drover_faults::projector`).

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
    rt.block_on(drover_faults::projector::main(
        std::env::args_os().collect(),
    ))
}
