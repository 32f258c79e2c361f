//! `drover bench` in a build without the `bench` feature (the shipped binary
//! and the container image): the benchmark, its chart and the throwaway
//! cluster manager are not compiled in, so the command only says how to get
//! a build that has them. It accepts any arguments, so a `drover bench …`
//! line copied from the docs gets that hint rather than a parse error.

use crate::{CliError, Context};

/// How to build a `drover` that has `drover bench`.
pub const BUILD_HINT: &str = "drover bench is not in this build (it needs the `bench` feature): \
     build it with `cargo build --release -p drover-cli --features bench`, \
     or run `cargo run --release -p drover-cli --features bench -- bench …`";

/// Arguments of `drover bench` without the feature: whatever was given,
/// unread.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Ignored: this build has no benchmark.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// Refuses with [`BUILD_HINT`] (exit code 2): the command is not in this
/// build. Opens no database.
///
/// # Errors
/// Always [`CliError::Usage`].
pub async fn run(_args: &BenchArgs, _cx: &mut Context<'_>) -> Result<(), CliError> {
    Err(CliError::Usage(BUILD_HINT.to_owned()))
}
