//! The `drover` binary: parse, run, exit. Everything else lives in the
//! `drover_cli` library so a service's own binary can offer the same CLI.

fn main() -> std::process::ExitCode {
    drover_cli::main()
}
