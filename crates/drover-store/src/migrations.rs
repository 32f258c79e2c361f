//! Where a database's migrations stand against the ones this binary embeds.
//!
//! `/readyz` answers from it: a worker whose schema is behind its binary is
//! live but not ready. A schema *ahead* of the binary is ready, because
//! drover's migrations follow expand-then-contract (docs/operations.md):
//! every migration keeps the previous release working, so during a rolling
//! upgrade the old workers keep draining after the new `drover migrate`.
//!
//! Versions are compared as sets, not by the newest one: migration numbers
//! are reserved per change and may land out of order (0007 and 0009 before
//! a later 0006), so a database at 0009 that lacks 0006 is behind.

/// The migration versions applied to a database and expected by this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationStatus {
    /// The newest version applied successfully (0 when none is).
    pub applied: i64,
    /// The newest version this binary embeds.
    pub expected: i64,
    /// How many of the versions this binary embeds are not applied
    /// successfully (a gap below `applied` counts too).
    pub missing: u32,
    /// True when a migration was recorded as failed half-way.
    pub dirty: bool,
}

impl MigrationStatus {
    /// A store without migrations (memory): always current.
    pub const NONE: MigrationStatus = MigrationStatus {
        applied: 0,
        expected: 0,
        missing: 0,
        dirty: false,
    };

    /// True when every migration this binary expects is applied and none
    /// failed half-way.
    pub fn is_current(&self) -> bool {
        !self.dirty && self.missing == 0
    }

    /// The status of a database whose migrations table holds `recorded`
    /// (version, success) against the versions a binary embeds.
    #[cfg(any(feature = "postgres", feature = "sqlite", test))]
    pub(crate) fn of(embedded: &[i64], recorded: &[(i64, bool)]) -> MigrationStatus {
        let applied_ok = |v: i64| recorded.iter().any(|&(r, ok)| r == v && ok);
        let missing = embedded.iter().filter(|&&v| !applied_ok(v)).count();
        MigrationStatus {
            applied: recorded
                .iter()
                .filter(|(_, ok)| *ok)
                .map(|(v, _)| *v)
                .max()
                .unwrap_or(0),
            expected: embedded.iter().copied().max().unwrap_or(0),
            missing: u32::try_from(missing).unwrap_or(u32::MAX),
            dirty: recorded.iter().any(|(_, ok)| !ok),
        }
    }

    /// The versions a migrator embeds.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn embedded_by(migrator: &sqlx::migrate::Migrator) -> Vec<i64> {
        migrator.iter().map(|m| m.version).collect()
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
                "migrations pending: {} of this binary's migrations not applied \
                 (the database is at {}, this binary expects {})",
                self.missing, self.applied, self.expected
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_or_dirty_is_not_current_and_ahead_is() {
        let ok = |vs: &[i64]| vs.iter().map(|&v| (v, true)).collect::<Vec<_>>();
        let embedded = [1, 2, 3];
        assert!(MigrationStatus::of(&embedded, &ok(&[1, 2, 3])).is_current());
        assert!(
            MigrationStatus::of(&embedded, &ok(&[1, 2, 3, 4])).is_current(),
            "expand-then-contract: ahead is fine"
        );
        let behind = MigrationStatus::of(&embedded, &ok(&[1, 2]));
        assert!(!behind.is_current());
        assert!(behind.to_string().contains("expects 3"), "{behind}");
        let dirty = MigrationStatus::of(&embedded, &[(1, true), (2, true), (3, false)]);
        assert!(dirty.dirty && !dirty.is_current());
        assert!(MigrationStatus::of(&[], &[]).is_current());
        assert!(MigrationStatus::NONE.is_current());
    }

    #[test]
    fn a_gap_below_the_newest_applied_version_is_not_current() {
        // Numbers reserved per change land out of order: 0006 merged after
        // 0007 and 0009 were applied. The newest applied equals the newest
        // embedded, and yet one migration is missing.
        let embedded = [1, 2, 3, 4, 5, 6, 7, 9];
        let recorded: Vec<(i64, bool)> = [1, 2, 3, 4, 5, 7, 9].iter().map(|&v| (v, true)).collect();
        let s = MigrationStatus::of(&embedded, &recorded);
        assert_eq!((s.applied, s.expected, s.missing), (9, 9, 1));
        assert!(!s.is_current(), "{s}");
    }
}
