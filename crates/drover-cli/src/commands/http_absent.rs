//! `drover serve` and `drover token` in a build without the `http` feature
//! (the README's demo build): the HTTP API, its dashboard and the token
//! store's commands are not compiled in, so both commands only say how to
//! get a build that has them. Like `drover bench` without `bench`, they
//! accept any arguments, so a line copied from the docs gets that hint
//! rather than a parse error.

use crate::{CliError, Context};

/// How to build a `drover` that has `drover serve` and `drover token`.
pub const BUILD_HINT: &str = "drover serve and drover token are not in this build (they need the \
     `http` feature, on by default): build with `cargo build --release -p drover-cli`";

/// Arguments of `drover serve` without the feature: whatever was given,
/// unread.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Ignored: this build has no HTTP API.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// Arguments of `drover token` without the feature: whatever was given,
/// unread.
pub type TokenArgs = ServeArgs;

/// Refuses with [`BUILD_HINT`] (exit code 2): the command is not in this
/// build. Opens no database. `serve::run` and `token::run` are both this
/// function (the `token` module is this one under a second name).
///
/// # Errors
/// Always [`CliError::Usage`].
pub async fn run(_args: &ServeArgs, _cx: &mut Context<'_>) -> Result<(), CliError> {
    Err(CliError::Usage(BUILD_HINT.to_owned()))
}
