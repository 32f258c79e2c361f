//! The one public error type of drover.
//!
//! Each variant is named for what the caller does about it: fix the input
//! (`InvalidInput`), give up on a stale claim (`Conflict`), look elsewhere
//! (`NotFound`), ask for a permission (`Forbidden`), or try again later
//! (`Unavailable`). Database errors are kept opaque behind `Unavailable` /
//! `Storage` so no driver type leaks into the public API.

use std::fmt;

/// A `Result` whose error is drover's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a drover call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input broke a rule; nothing was written. `field` names the input.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field (`kind`, `lane`, `payload`, …).
        field: &'static str,
        /// Why it was refused, in words a user can act on.
        reason: String,
    },
    /// The write lost a race: the claim token is stale, the lease has passed,
    /// or the item is not in a state that allows the transition.
    #[error("conflict: {0}")]
    Conflict(String),
    /// No item (or other entity) with that identity is visible to the caller.
    #[error("not found: {0}")]
    NotFound(String),
    /// The principal lacks the permission the operation requires.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The database could not be reached or answered with a transient error;
    /// retrying later may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] Opaque),
    /// The database refused the statement for a reason retrying will not fix
    /// (a schema mismatch, a constraint we did not expect).
    #[error("storage error: {0}")]
    Storage(#[source] Opaque),
    /// The configuration is inconsistent; `reason` names the relation broken.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// The kind of an [`Error`], for matching without the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`Error::InvalidInput`].
    InvalidInput,
    /// See [`Error::Conflict`].
    Conflict,
    /// See [`Error::NotFound`].
    NotFound,
    /// See [`Error::Forbidden`].
    Forbidden,
    /// See [`Error::Unavailable`].
    Unavailable,
    /// See [`Error::Storage`].
    Storage,
    /// See [`Error::Config`].
    Config,
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Forbidden(_) => ErrorKind::Forbidden,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Storage(_) => ErrorKind::Storage,
            Error::Config(_) => ErrorKind::Config,
        }
    }

    /// True for a stale claim token or passed lease.
    pub fn is_conflict(&self) -> bool {
        self.kind() == ErrorKind::Conflict
    }

    /// True when the entity does not exist (for this tenant).
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// True when retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }

    /// Shorthand for an [`Error::InvalidInput`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}

/// A database error kept opaque: its message is shown, its type is not part
/// of the API.
pub struct Opaque(Box<dyn std::error::Error + Send + Sync + 'static>);

impl Opaque {
    /// Wraps any error.
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Opaque(Box::new(e))
    }

    /// Wraps a message.
    pub fn msg(m: impl Into<String>) -> Self {
        Opaque(m.into().into())
    }
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Opaque {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

#[cfg(feature = "sqlx")]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => Error::NotFound("row".into()),
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_) => Error::Unavailable(Opaque::new(e)),
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.to_string()).unwrap_or_default();
                // 08xxx connection, 40001 serialization, 40P01 deadlock,
                // 53xxx resources, 57Pxx shutdown: all worth a retry.
                // SQLite: 5 BUSY, 6 LOCKED (and their extended codes).
                let transient = code.starts_with("08")
                    || code == "40001"
                    || code == "40P01"
                    || code.starts_with("53")
                    || code.starts_with("57P")
                    || code == "5"
                    || code == "6"
                    || code == "517"
                    || code == "261"
                    || code == "262";
                if transient {
                    Error::Unavailable(Opaque::new(e))
                } else {
                    Error::Storage(Opaque::new(e))
                }
            }
            _ => Error::Storage(Opaque::new(e)),
        }
    }
}

#[cfg(feature = "sqlx")]
impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Error::Storage(Opaque::new(e))
    }
}
