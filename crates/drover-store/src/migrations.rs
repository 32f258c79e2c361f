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

    /// The versions a backend's embedded migrations carry.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn embedded_by(files: &[(&str, &str)]) -> Vec<i64> {
        files
            .iter()
            .filter_map(|(name, _)| name.split_once('_')?.0.parse().ok())
            .collect()
    }
}

/// A digest of the PostgreSQL migrations this binary embeds (each file's
/// name and text), as 16 hex digits.
///
/// Test helpers key the schemas they migrate once and reuse by it, so a
/// schema migrated by a binary with other migrations (an edited or added
/// file) is never handed to this one. Stable for one build of the standard
/// library's hasher, which is all such a key needs: a toolchain upgrade
/// only makes the old schemas unused.
#[cfg(feature = "postgres")]
pub fn postgres_digest() -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    embedded::POSTGRES.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// The migrations this binary carries, per backend (written by the build
/// script from `migrations/<backend>/`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_migrations.rs"));
}

/// A backend's embedded migrations as sqlx's migrator runs them, read the
/// way sqlx reads a migrations directory (`<version>_<description>.sql`,
/// `.up.sql`/`.down.sql` reversible, `-- no-transaction` on the first line
/// to run outside a transaction), so each checksum is the one a database
/// migrated by an earlier drover recorded.
///
/// # Errors
/// A file name without a numeric version (a build that embeds one is a
/// packaging mistake, reported when migrating).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) async fn migrator(
    files: &'static [(&'static str, &'static str)],
) -> drover_core::Result<sqlx::migrate::Migrator> {
    Ok(sqlx::migrate::Migrator::new(Embedded(files)).await?)
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[derive(Debug)]
struct Embedded(&'static [(&'static str, &'static str)]);

#[cfg(any(feature = "postgres", feature = "sqlite"))]
impl<'s> sqlx::migrate::MigrationSource<'s> for Embedded {
    fn resolve(
        self,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>,
                > + Send
                + 's,
        >,
    > {
        Box::pin(async move {
            let mut out = Vec::with_capacity(self.0.len());
            for (name, sql) in self.0 {
                out.push(migration(name, sql)?);
            }
            out.sort_by_key(|m| m.version);
            Ok(out)
        })
    }
}

/// One embedded file as a migration.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn migration(
    name: &str,
    sql: &'static str,
) -> Result<sqlx::migrate::Migration, sqlx::error::BoxDynError> {
    use sqlx::migrate::{Migration, MigrationType};
    let (version, rest) = name
        .split_once('_')
        .ok_or_else(|| format!("migration file {name:?}: expected <version>_<description>.sql"))?;
    let version: i64 = version
        .parse()
        .map_err(|_| format!("migration file {name:?}: the version is not a number"))?;
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Ok(Migration::new(
        version,
        std::borrow::Cow::Owned(description),
        kind,
        std::borrow::Cow::Borrowed(sql),
        no_tx,
    ))
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

    /// The embedded migrations are what sqlx reads from the directories:
    /// same versions, descriptions, kinds, SQL and checksums, so a database
    /// migrated by a drover built with `sqlx::migrate!` stays valid.
    #[cfg(all(feature = "postgres", feature = "sqlite"))]
    #[tokio::test]
    async fn embedded_migrations_are_the_directory_as_sqlx_reads_it() {
        for (files, dir) in [
            (embedded::POSTGRES, "migrations/postgres"),
            (embedded::SQLITE, "migrations/sqlite"),
        ] {
            let ours = migrator(files).await.expect("embedded");
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let theirs = sqlx::migrate::Migrator::new(path).await.expect("directory");
            let ours: Vec<_> = ours.iter().collect();
            let theirs: Vec<_> = theirs.iter().collect();
            assert!(!ours.is_empty(), "{dir}: nothing embedded");
            assert_eq!(ours.len(), theirs.len(), "{dir}");
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.version, b.version, "{dir}");
                assert_eq!(a.description, b.description, "{dir} {}", a.version);
                assert_eq!(a.migration_type, b.migration_type, "{dir} {}", a.version);
                assert_eq!(a.sql, b.sql, "{dir} {}", a.version);
                assert_eq!(a.checksum, b.checksum, "{dir} {}", a.version);
                assert_eq!(a.no_tx, b.no_tx, "{dir} {}", a.version);
            }
            let versions: Vec<i64> = theirs.iter().map(|m| m.version).collect();
            assert_eq!(MigrationStatus::embedded_by(files), versions, "{dir}");
        }
    }

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
