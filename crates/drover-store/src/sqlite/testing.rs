//! The contract-suite harness for SQLite: a fresh, migrated database file
//! per case, on a [`ManualClock`], deleted afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use uuid::Uuid;

use super::{SqliteOptions, SqliteStore};
use crate::contract::Harness;
use crate::{ManualClock, Store};

/// Builds a fresh SQLite store for one contract case: a new file under the
/// system temp directory, migrated, reading a [`ManualClock`]. The cleanup
/// closes the store and deletes the file and its WAL companions.
///
/// # Panics
/// When the temp file cannot be created or migrated: a test harness has no
/// caller to hand the error to.
pub async fn sqlite_harness() -> Harness {
    let path = std::env::temp_dir().join(format!("drover-test-{}.db", Uuid::new_v4()));
    let clock = Arc::new(ManualClock::new());
    let opts = SqliteOptions {
        clock: clock.clone(),
        ..SqliteOptions::default()
    };
    let store = match SqliteStore::open(&path.to_string_lossy(), opts).await {
        Ok(s) => s,
        Err(e) => panic!("opening the test database {}: {e}", path.display()),
    };
    if let Err(e) = store.migrate().await {
        panic!("migrating the test database {}: {e}", path.display());
    }
    let closing = store.clone();
    let tx_store = store.clone();
    let insert_in: crate::contract::InsertIn = Arc::new(move |item| {
        let store = tx_store.clone();
        Box::pin(async move {
            let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await?;
            let out = super::insert_in(&mut tx, &item, store.now()).await?;
            tx.commit().await?;
            Ok(out)
        })
    });
    let ob_store = store.clone();
    let outbox_in: crate::contract::OutboxIn = Arc::new(move |row, commit| {
        let store = ob_store.clone();
        Box::pin(async move {
            let mut tx = store.writer().begin_with("BEGIN IMMEDIATE").await?;
            super::outbox_insert_in(&mut tx, &row, store.now()).await?;
            if commit {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(())
        })
    });
    let peer_path = path.clone();
    let peer_clock = clock.clone();
    let peer: crate::contract::Peer = Arc::new(move || {
        let (path, clock) = (peer_path.clone(), peer_clock.clone());
        Box::pin(async move {
            let opts = SqliteOptions {
                clock,
                ..SqliteOptions::default()
            };
            match SqliteStore::open(&path.to_string_lossy(), opts).await {
                Ok(s) => {
                    let s: Arc<dyn Store> = Arc::new(s);
                    s
                }
                Err(e) => panic!("opening a peer of {}: {e}", path.display()),
            }
        })
    });
    Harness {
        insert_in: Some(insert_in),
        outbox_in: Some(outbox_in),
        peer: Some(peer),
        store: Arc::new(store),
        clock: Some(clock),
        cleanup: Some(Box::new(move || {
            Box::pin(async move {
                closing.close().await;
                remove_db_files(&path);
            })
        })),
    }
}

/// Deletes a database file and its `-wal` / `-shm` companions, ignoring
/// files already gone.
pub(super) fn remove_db_files(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p: PathBuf = path.to_path_buf().into_os_string().into();
        p.as_mut_os_string().push(suffix);
        let _ = std::fs::remove_file(&p);
    }
}
