//! Embeds the store's PostgreSQL statements for the soak's wait sampler:
//! writes `$OUT_DIR/statements.rs`, one (file stem, SQL) pair per file of
//! `drover-store/sql/postgres`, so a session seen in `pg_stat_activity` is
//! named by the statement file it is running ([`crate::waits`]).
//!
//! Why a build script: the list follows the directory by itself, so a
//! statement added to the store is named in the next soak without an edit
//! here; `include_str!` of each file rebuilds the crate when one changes.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let out_dir = std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&manifest).join("../drover-store/sql/postgres");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The store's PostgreSQL statements: each file's stem and SQL, in name order.\n\
         pub(crate) const STATEMENTS: &[(&str, &str)] = &[\n",
    );
    for f in files {
        let stem = f
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    ({stem:?}, include_str!({:?})),",
            f.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest = Path::new(&out_dir).join("statements.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
