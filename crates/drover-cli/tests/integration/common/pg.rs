//! A fresh PostgreSQL database per test, on the server `DATABASE_URL` names
//! (as `drover::testing::pg_url()` resolves it), dropped after.

use sqlx::Connection;

/// Runs a future to completion on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// The PostgreSQL server tests use.
pub fn pg_url() -> String {
    block_on(drover::testing::pg_url())
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

/// A database created for one test (`<prefix>_<random>`), dropped on drop.
pub struct FreshDb {
    pub admin: String,
    pub name: String,
    pub url: String,
}

impl FreshDb {
    pub fn new(prefix: &str) -> Self {
        let admin = pg_url();
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        block_on(async {
            let mut c = sqlx::PgConnection::connect(&admin)
                .await
                .expect("connect to PostgreSQL (DATABASE_URL)");
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut c)
                .await
                .expect("create database");
        });
        let url = with_database(&admin, &name);
        FreshDb { admin, name, url }
    }

    /// One scalar from the database.
    pub fn scalar_i64(&self, sql: &str) -> i64 {
        block_on(async {
            let mut c = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect");
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
        })
    }
}

impl FreshDb {
    /// One text scalar from the database ("" for NULL).
    pub fn scalar_text(&self, sql: &str) -> String {
        block_on(async {
            let mut c = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect");
            sqlx::query_scalar::<_, Option<String>>(sql)
                .fetch_one(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .unwrap_or_default()
        })
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        block_on(async move {
            if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut c)
                    .await;
            }
        });
    }
}
