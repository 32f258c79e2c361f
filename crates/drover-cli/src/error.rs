//! The CLI's error: a drover error, possibly located at a line of an input
//! file, a usage error, or an I/O failure, each mapped to an exit code.

use std::fmt;

use drover::ErrorKind;

/// The exit code of a successful command.
pub const EXIT_OK: u8 = 0;
/// The exit code of a command that failed at run time: not found, conflict,
/// forbidden, storage unavailable, configuration, I/O.
pub const EXIT_FAILURE: u8 = 1;
/// The exit code of a command refused for its input: nothing was written.
pub const EXIT_INVALID: u8 = 2;

/// Why a command failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CliError {
    /// An error from the drover library (or a CLI argument checked with the
    /// library's rules, reported as [`drover::Error::InvalidInput`]).
    Drover(drover::Error),
    /// An input file's line broke a rule; `line` counts from 1.
    AtLine {
        /// The 1-based line number in the input file.
        line: usize,
        /// What was wrong with it.
        error: drover::Error,
    },
    /// The command line itself could not be parsed (clap's message).
    Usage(String),
    /// A probe (`drover healthcheck`) got no answer or not 200.
    Unhealthy(String),
    /// The database knows the thing named (a schedule), but its code is in
    /// a service's binary, not this one: the message says where to run the
    /// command instead.
    DeclaredElsewhere(String),
    /// Reading input or writing output failed.
    Io {
        /// What the CLI was doing.
        context: String,
        /// The underlying error.
        error: std::io::Error,
    },
}

impl CliError {
    /// The process exit code for this error: 2 for input that broke a rule
    /// (nothing was written), 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Drover(e) | CliError::AtLine { error: e, .. } => {
                if e.kind() == ErrorKind::InvalidInput {
                    EXIT_INVALID
                } else {
                    EXIT_FAILURE
                }
            }
            CliError::Usage(_) => EXIT_INVALID,
            CliError::Unhealthy(_) | CliError::DeclaredElsewhere(_) | CliError::Io { .. } => {
                EXIT_FAILURE
            }
        }
    }

    /// Shorthand for an invalid-input error on `field`.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        CliError::Drover(drover::Error::invalid(field, reason))
    }

    pub(crate) fn io(context: impl Into<String>, error: std::io::Error) -> Self {
        CliError::Io {
            context: context.into(),
            error,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Drover(e) => write!(f, "{e}"),
            CliError::AtLine { line, error } => write!(f, "line {line}: {error}"),
            CliError::Usage(m) => f.write_str(m),
            CliError::Unhealthy(m) => write!(f, "unhealthy: {m}"),
            CliError::DeclaredElsewhere(m) => f.write_str(m),
            CliError::Io { context, error } => write!(f, "{context}: {error}"),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Drover(e) | CliError::AtLine { error: e, .. } => Some(e),
            CliError::Io { error, .. } => Some(error),
            CliError::Usage(_) | CliError::Unhealthy(_) | CliError::DeclaredElsewhere(_) => None,
        }
    }
}

impl From<drover::Error> for CliError {
    fn from(e: drover::Error) -> Self {
        CliError::Drover(e)
    }
}

/// Writing the CLI's own output failed (a closed pipe, a full disk).
impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::io("writing output", e)
    }
}
