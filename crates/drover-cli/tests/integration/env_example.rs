//! `.env.example` at the repository root is `drover env-example`'s output,
//! and lists every variable any command reads.
//! Regenerate: `cargo run -p drover-cli -- env-example > .env.example`.

#![allow(clippy::expect_used, missing_docs)]

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.env.example");

#[test]
fn env_example_is_generated_from_the_settings_types() {
    let committed = std::fs::read_to_string(FILE).expect("read .env.example");
    let generated = drover_cli::commands::env_example::render();
    assert!(
        committed == generated,
        ".env.example is stale: run `cargo run -p drover-cli -- env-example > .env.example`\n\
         --- generated ---\n{generated}"
    );
}

#[test]
fn env_example_lists_every_variable_a_command_or_the_worker_reads() {
    let text = drover_cli::commands::env_example::render();
    let names = drover_cli::commands::env_example::variable_names()
        .into_iter()
        .chain(
            drover::worker::WorkerSettings::variables()
                .into_iter()
                .map(|v| v.name.to_owned()),
        );
    for name in names {
        assert!(text.contains(&format!("\n#{name}=")), "{name} is missing");
    }
}
