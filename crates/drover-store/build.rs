//! Embeds the schema migrations: writes `$OUT_DIR/embedded_migrations.rs`,
//! one list per backend of (file name, SQL) in file-name order, each SQL an
//! `include_str!` of its file so an edited migration rebuilds the crate.
//!
//! Why a build script rather than `sqlx::migrate!`: the macro needs sqlx's
//! `macros` feature, which compiles sqlx and both database drivers a second
//! time for the host (libsqlite3's C sources included) in every clean build;
//! this script needs nothing but the standard library.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let out_dir = std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    let mut out = String::new();
    for (backend, name) in [("postgres", "POSTGRES"), ("sqlite", "SQLITE")] {
        let dir = Path::new(&manifest).join("migrations").join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        let _ = writeln!(
            out,
            "/// `migrations/{backend}`: each file's name and SQL, in name order.\n\
             #[cfg(feature = \"{backend}\")]\n\
             pub(crate) const {name}: &[(&str, &str)] = &["
        );
        for f in files {
            let file = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    ({file:?}, include_str!({:?})),",
                f.display().to_string()
            );
        }
        out.push_str("];\n");
    }
    let dest = Path::new(&out_dir).join("embedded_migrations.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
