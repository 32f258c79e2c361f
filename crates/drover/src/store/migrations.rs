//! Where a database's migrations stand against the ones this binary embeds.
//!
//! `/readyz` answers from it: a worker whose schema is behind its binary is
//! live but not ready. A schema *ahead* of the binary is ready, because
//! drover's migrations follow expand-then-contract (docs/operations.md):
//! every migration keeps the previous release working, so during a rolling
//! upgrade the old workers keep draining after the new `drover migrate`.

/// The migration versions applied to a database and expected by this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationStatus {
    /// The newest version applied successfully (0 when none is).
    pub applied: i64,
    /// The newest version this binary embeds.
    pub expected: i64,
    /// True when a migration was recorded as failed half-way.
    pub dirty: bool,
}

impl MigrationStatus {
    /// A store without migrations (memory): always current.
    pub const NONE: MigrationStatus = MigrationStatus {
        applied: 0,
        expected: 0,
        dirty: false,
    };

    /// True when every migration this binary expects is applied and none
    /// failed half-way.
    pub fn is_current(&self) -> bool {
        !self.dirty && self.applied >= self.expected
    }

    /// The newest version a migrator embeds.
    pub(crate) fn expected_by(migrator: &sqlx::migrate::Migrator) -> i64 {
        migrator.iter().map(|m| m.version).max().unwrap_or(0)
    }
}

impl std::fmt::Display for MigrationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.dirty {
            write!(f, "a migration failed half-way (applied {})", self.applied)
        } else if self.is_current() {
            write!(
                f,
                "migrations current (applied {}, expected {})",
                self.applied, self.expected
            )
        } else {
            write!(
                f,
                "migrations pending: the database is at {}, this binary expects {}",
                self.applied, self.expected
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_or_dirty_is_not_current_and_ahead_is() {
        let s = |applied, expected, dirty| MigrationStatus {
            applied,
            expected,
            dirty,
        };
        assert!(s(3, 3, false).is_current());
        assert!(
            s(4, 3, false).is_current(),
            "expand-then-contract: ahead is fine"
        );
        assert!(!s(2, 3, false).is_current());
        assert!(!s(3, 3, true).is_current());
        assert!(MigrationStatus::NONE.is_current());
        assert!(s(2, 3, false).to_string().contains("expects 3"));
    }
}
