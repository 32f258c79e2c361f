//! Contract cases for the paced vacuum's seam: PostgreSQL lists its
//! schema's tables with their garbage and vacuums one of them; SQLite and
//! memory have no garbage and no table to vacuum; on every backend a table
//! that is not the store's own is `NotFound`, and nothing is spliced.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::Backend;

/// PostgreSQL lists the schema's tables (`items` among them), sorted, and
/// only those; the other backends list nothing, even after writes.
pub async fn table_garbage_lists_the_stores_own_tables(h: &Harness) {
    h.store.item_insert(&new("vacuum.a")).await.expect("insert");
    let garbage = h.store.table_garbage().await.expect("garbage");
    match h.store.backend() {
        Backend::Postgres => {
            let names: Vec<&str> = garbage.iter().map(|g| g.table.as_str()).collect();
            for t in ["items", "audit", "workers", "sweep_lease"] {
                assert!(names.contains(&t), "{t} missing from {names:?}");
            }
            let mut sorted = names.clone();
            sorted.sort_unstable();
            assert_eq!(names, sorted, "sorted by table name");
            sorted.dedup();
            assert_eq!(sorted.len(), names.len(), "one row per table: {names:?}");
            assert!(
                !names.contains(&"pg_class") && !names.contains(&"pg_statistic"),
                "catalog tables listed: {names:?}"
            );
        }
        Backend::Sqlite | Backend::Memory => {
            assert!(garbage.is_empty(), "no garbage here: {garbage:?}");
        }
    }
}

/// A table that is not one of the store's is `NotFound` everywhere: an
/// unknown name, another schema's (catalog) table, and a name that would
/// break out of quoting.
pub async fn table_vacuum_of_an_unknown_table_is_not_found(h: &Harness) {
    for table in [
        "no_such_table",
        "pg_class",
        "items\"; DROP TABLE items; --",
        "",
        "Items",
    ] {
        let e = h
            .store
            .table_vacuum(table)
            .await
            .expect_err("not the store's table");
        assert_eq!(e.kind(), ErrorKind::NotFound, "{table:?}: {e}");
    }
    // Nothing was dropped.
    h.store.item_insert(&new("vacuum.b")).await.expect("insert");
}

/// PostgreSQL vacuums its own `items` (the owner connects in the test
/// harness) and reads its garbage right after; elsewhere even `items` is
/// `NotFound`: there is nothing to vacuum.
pub async fn table_vacuum_of_an_own_table(h: &Harness) {
    let item = new("vacuum.c");
    h.store.item_insert(&item).await.expect("insert");
    let r = h.store.table_vacuum("items").await;
    match h.store.backend() {
        Backend::Postgres => {
            let v = r.expect("the owner vacuums its own table");
            assert_eq!(v.after.table, "items");
            // Nobody holds its lock in a fresh schema: this vacuum ran.
            assert!(v.vacuumed, "{v:?}");
            assert!(v.after.last_vacuum.is_some(), "{v:?}");
        }
        Backend::Sqlite | Backend::Memory => {
            assert_eq!(
                r.expect_err("nothing to vacuum").kind(),
                ErrorKind::NotFound
            );
        }
    }
    // A vacuum changes no row.
    let got = h
        .store
        .item_get(item.tenant_id, item.id)
        .await
        .expect("get")
        .expect("still there");
    assert_eq!(got.status, Status::Pending);
}
