//! The engine-neutral caller transaction: one type for a transaction on the
//! store's own database, whichever engine it runs on, so one body of code
//! writes the caller's rows, enqueues, starts orchestrations and writes
//! outbox rows on PostgreSQL and SQLite alike.
//!
//! - [`Tx`] owns a transaction the store opened for a caller
//!   ([`Store::tx_begin`](crate::Store::tx_begin); `Queue::begin` above):
//!   on PostgreSQL a transaction of the store's pool as its login, with the
//!   login's own `search_path`; on SQLite the one writer's `BEGIN
//!   IMMEDIATE`. The caller commits or rolls it back.
//! - [`TxConn`] borrows one: from a [`Tx`] ([`Tx::conn`]) or from the
//!   transaction a projector writes in
//!   ([`ProjectionTx::conn`](crate::projector::ProjectionTx::conn)). Code
//!   that takes `&mut TxConn<'_>` serves both.
//! - [`Query`] runs the caller's own statement on either, with one SQL
//!   text: parameters are written `$1`, `$2` … on both engines
//!   (PostgreSQL's own form; sqlx's SQLite driver binds `$N` to the N-th
//!   value too), and [`Row`] reads a result column on both.
//!
//! Invariant: nothing here names the queue or a role; the queue's
//! `enqueue_in`, `outbox_*_in` and `start_in` reach the backend through
//! [`Tx::caller`] / [`TxConn::caller`], the store's one caller seam
//! ([`CallerTx`]).

// Without a backend every method diverges on the never-built variant, so
// its arguments go unused.
#![cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_variables, unused_imports, unreachable_code, dead_code)
)]

use std::sync::Arc;

use crate::{Backend, CallerTx};
use drover_core::error::Result;

/// Publishes an in-process wake-up for a lane once a caller's transaction
/// committed (SQLite's way; PostgreSQL's `NOTIFY` is delivered at the
/// commit by the server).
pub type Waker = Arc<dyn Fn(&str) + Send + Sync>;

/// What a value bound to a [`Query`] must be on each engine this build has.
/// The traits are implemented for every type that qualifies; name
/// [`Bind`], [`Decode`] and [`Column`] instead.
pub mod engine {
    /// PostgreSQL's half.
    #[cfg(feature = "postgres")]
    pub mod postgres {
        use sqlx::Postgres;
        use sqlx::postgres::PgRow;

        /// A value PostgreSQL can bind.
        pub trait Bind<'q>: sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + 'q {}
        impl<'q, T: sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + 'q> Bind<'q> for T {}
        /// A value PostgreSQL can decode from a column.
        pub trait Decode<'r>: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres> {}
        impl<'r, T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>> Decode<'r> for T {}
        /// A column index (a name or a position) of a PostgreSQL row.
        pub trait Column: sqlx::ColumnIndex<PgRow> {}
        impl<T: sqlx::ColumnIndex<PgRow>> Column for T {}
    }
    /// Without PostgreSQL: anything.
    #[cfg(not(feature = "postgres"))]
    pub mod postgres {
        /// Anything.
        pub trait Bind<'q> {}
        impl<T> Bind<'_> for T {}
        /// Anything.
        pub trait Decode<'r> {}
        impl<T> Decode<'_> for T {}
        /// Anything.
        pub trait Column {}
        impl<T> Column for T {}
    }
    /// SQLite's half.
    #[cfg(feature = "sqlite")]
    pub mod sqlite {
        use sqlx::Sqlite;
        use sqlx::sqlite::SqliteRow;

        /// A value SQLite can bind.
        pub trait Bind<'q>: sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + 'q {}
        impl<'q, T: sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + 'q> Bind<'q> for T {}
        /// A value SQLite can decode from a column.
        pub trait Decode<'r>: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite> {}
        impl<'r, T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>> Decode<'r> for T {}
        /// A column index (a name or a position) of a SQLite row.
        pub trait Column: sqlx::ColumnIndex<SqliteRow> {}
        impl<T: sqlx::ColumnIndex<SqliteRow>> Column for T {}
    }
    /// Without SQLite: anything.
    #[cfg(not(feature = "sqlite"))]
    pub mod sqlite {
        /// Anything.
        pub trait Bind<'q> {}
        impl<T> Bind<'_> for T {}
        /// Anything.
        pub trait Decode<'r> {}
        impl<T> Decode<'_> for T {}
        /// Anything.
        pub trait Column {}
        impl<T> Column for T {}
    }
}

/// A value a [`Query`] can bind on every engine this build has: integers,
/// floats, `bool`, strings, `Option<_>` of them (NULL), `Vec<u8>`, and
/// what sqlx's `uuid`, `chrono` and `json` support gives both (a `Uuid`
/// is a 16-byte BLOB on SQLite, an instant is text there: pick the column
/// types with that in mind).
pub trait Bind<'q>: engine::postgres::Bind<'q> + engine::sqlite::Bind<'q> {}
impl<'q, T: engine::postgres::Bind<'q> + engine::sqlite::Bind<'q>> Bind<'q> for T {}

/// A value a [`Row`] can decode on every engine this build has.
pub trait Decode<'r>: engine::postgres::Decode<'r> + engine::sqlite::Decode<'r> {}
impl<'r, T: engine::postgres::Decode<'r> + engine::sqlite::Decode<'r>> Decode<'r> for T {}

/// A column of a [`Row`]: its name (`&str`) or its position (`usize`).
pub trait Column: engine::postgres::Column + engine::sqlite::Column {}
impl<T: engine::postgres::Column + engine::sqlite::Column> Column for T {}

/// A transaction on the store's own database, opened for a caller by
/// [`Store::tx_begin`](crate::Store::tx_begin) (`queue.begin()`): the
/// caller's statements ([`Tx::query`]), enqueues, orchestration starts and
/// outbox rows written on it commit or roll back together.
///
/// Dropped without [`Tx::commit`], it rolls back. On SQLite it holds the
/// file's one writer while open: the store's own writes (a plain
/// `queue.enqueue`, a worker's claims) wait for it, so write through it
/// and commit promptly.
pub struct Tx {
    conn: Owned,
    /// Lanes to wake in process after the commit.
    wakes: Vec<String>,
    waker: Option<Waker>,
}

enum Owned {
    #[cfg(feature = "postgres")]
    Postgres {
        tx: sqlx::Transaction<'static, sqlx::Postgres>,
        /// Whether sqlx may name (prepare and cache) the caller's
        /// statements: not behind a transaction pooler.
        persistent: bool,
    },
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    /// Built without either engine, nothing can be opened.
    #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
    Never(std::convert::Infallible),
}

impl std::fmt::Debug for Tx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx")
            .field("backend", &self.backend())
            .field("wakes", &self.wakes)
            .finish_non_exhaustive()
    }
}

impl Tx {
    /// A PostgreSQL transaction the store opened. `persistent`: whether
    /// the caller's statements may be prepared and cached.
    #[cfg(feature = "postgres")]
    pub fn from_postgres(tx: sqlx::Transaction<'static, sqlx::Postgres>, persistent: bool) -> Tx {
        Tx {
            conn: Owned::Postgres { tx, persistent },
            wakes: Vec::new(),
            waker: None,
        }
    }

    /// A SQLite transaction the store opened on its writer (`BEGIN
    /// IMMEDIATE`); `waker` publishes the wake-ups asked for once it
    /// commits.
    #[cfg(feature = "sqlite")]
    pub fn from_sqlite(tx: sqlx::Transaction<'static, sqlx::Sqlite>, waker: Waker) -> Tx {
        Tx {
            conn: Owned::Sqlite(tx),
            wakes: Vec::new(),
            waker: Some(waker),
        }
    }

    /// The engine the transaction runs on.
    pub fn backend(&self) -> Backend {
        match &self.conn {
            #[cfg(feature = "postgres")]
            Owned::Postgres { .. } => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            Owned::Sqlite(_) => Backend::Sqlite,
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Owned::Never(never) => match *never {},
        }
    }

    /// Borrows the transaction as a [`TxConn`], the type code shared with a
    /// projector's `apply` takes.
    pub fn conn(&mut self) -> TxConn<'_> {
        let conn = match &mut self.conn {
            #[cfg(feature = "postgres")]
            Owned::Postgres { tx, persistent } => Borrowed::Postgres {
                conn: tx,
                persistent: *persistent,
            },
            #[cfg(feature = "sqlite")]
            Owned::Sqlite(tx) => Borrowed::Sqlite(tx),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Owned::Never(never) => match *never {},
        };
        TxConn {
            conn,
            wakes: Some(&mut self.wakes),
        }
    }

    /// Starts the caller's own statement, one SQL text for both engines
    /// (parameters `$1`, `$2` …). See [`Query`].
    pub fn query<'q>(&'q mut self, sql: &'q str) -> Query<'q> {
        let TxConn { conn, .. } = self.conn();
        conn.query(sql)
    }

    /// The connection as the store's caller-transaction methods take it.
    pub fn caller(&mut self) -> CallerTx<'_> {
        let TxConn { conn, .. } = self.conn();
        conn.caller()
    }

    /// Asks for an in-process wake-up of `lane` once the transaction
    /// commits (on SQLite: local workers claim at once instead of at their
    /// next poll; on PostgreSQL the server's `NOTIFY` does it, and this is
    /// nothing). The queue's `*_in` calls ask for it themselves.
    pub fn wake_after_commit(&mut self, lane: &str) {
        if self.waker.is_some() && !self.wakes.iter().any(|l| l == lane) {
            self.wakes.push(lane.to_owned());
        }
    }

    /// The PostgreSQL connection, when the transaction is on PostgreSQL:
    /// for what [`Query`] does not cover (sqlx's own API, `COPY`).
    #[cfg(feature = "postgres")]
    pub fn postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match &mut self.conn {
            Owned::Postgres { tx, .. } => Some(&mut **tx),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The SQLite connection, when the transaction is on SQLite.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(&mut self) -> Option<&mut sqlx::SqliteConnection> {
        match &mut self.conn {
            Owned::Sqlite(tx) => Some(&mut **tx),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Commits, then publishes the wake-ups asked for.
    ///
    /// # Errors
    /// The database's refusal of the commit (nothing of the transaction
    /// persists then, and nothing is woken).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped after the commit was sent, the transaction
    /// may or may not have committed, and no wake-up is published (workers
    /// find the work at their next poll).
    pub async fn commit(self) -> Result<()> {
        match self.conn {
            #[cfg(feature = "postgres")]
            Owned::Postgres { tx, .. } => tx.commit().await?,
            #[cfg(feature = "sqlite")]
            Owned::Sqlite(tx) => tx.commit().await?,
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Owned::Never(never) => match never {},
        }
        if let Some(waker) = &self.waker {
            for lane in &self.wakes {
                waker(lane);
            }
        }
        Ok(())
    }

    /// Rolls back: nothing written on the transaction persists.
    ///
    /// # Errors
    /// The database's error for the rollback (the server rolls the
    /// transaction back anyway when the connection goes).
    pub async fn rollback(self) -> Result<()> {
        match self.conn {
            #[cfg(feature = "postgres")]
            Owned::Postgres { tx, .. } => tx.rollback().await?,
            #[cfg(feature = "sqlite")]
            Owned::Sqlite(tx) => tx.rollback().await?,
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Owned::Never(never) => match never {},
        }
        Ok(())
    }
}

/// A borrowed transaction on the store's database, either engine: from a
/// [`Tx`] ([`Tx::conn`]) or from a projector's transaction
/// ([`ProjectionTx::conn`](crate::projector::ProjectionTx::conn)). Its
/// owner commits it.
pub struct TxConn<'c> {
    conn: Borrowed<'c>,
    /// The owning [`Tx`]'s wake-ups, when it has one.
    wakes: Option<&'c mut Vec<String>>,
}

enum Borrowed<'c> {
    #[cfg(feature = "postgres")]
    Postgres {
        conn: &'c mut sqlx::PgConnection,
        persistent: bool,
    },
    #[cfg(feature = "sqlite")]
    Sqlite(&'c mut sqlx::SqliteConnection),
    /// Built without either engine, nothing borrows a connection.
    #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
    Never(std::convert::Infallible, std::marker::PhantomData<&'c ()>),
}

impl std::fmt::Debug for TxConn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxConn")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl<'c> TxConn<'c> {
    /// A PostgreSQL connection inside a transaction the store runs (a
    /// projector's). `persistent`: whether statements may be prepared and
    /// cached.
    #[cfg(feature = "postgres")]
    pub fn from_postgres(conn: &'c mut sqlx::PgConnection, persistent: bool) -> TxConn<'c> {
        TxConn {
            conn: Borrowed::Postgres { conn, persistent },
            wakes: None,
        }
    }

    /// A SQLite connection inside a transaction the store runs (a
    /// projector's).
    #[cfg(feature = "sqlite")]
    pub fn from_sqlite(conn: &'c mut sqlx::SqliteConnection) -> TxConn<'c> {
        TxConn {
            conn: Borrowed::Sqlite(conn),
            wakes: None,
        }
    }

    /// The engine the transaction runs on.
    pub fn backend(&self) -> Backend {
        self.conn.backend()
    }

    /// A shorter borrow of the same transaction, to hand to a function
    /// while keeping this one.
    pub fn reborrow(&mut self) -> TxConn<'_> {
        TxConn {
            conn: self.conn.reborrow(),
            wakes: self.wakes.as_deref_mut(),
        }
    }

    /// Starts the caller's own statement, one SQL text for both engines
    /// (parameters `$1`, `$2` …). See [`Query`].
    pub fn query<'q>(&'q mut self, sql: &'q str) -> Query<'q> {
        self.conn.reborrow().query(sql)
    }

    /// The connection as the store's caller-transaction methods take it.
    pub fn caller(&mut self) -> CallerTx<'_> {
        self.conn.reborrow().caller()
    }

    /// As [`Tx::wake_after_commit`], when the transaction is a [`Tx`]'s; a
    /// projector's transaction publishes none (workers find its work at
    /// their next poll on SQLite).
    pub fn wake_after_commit(&mut self, lane: &str) {
        if let Some(wakes) = self.wakes.as_deref_mut()
            && !wakes.iter().any(|l| l == lane)
        {
            wakes.push(lane.to_owned());
        }
    }

    /// The PostgreSQL connection, when the transaction is on PostgreSQL.
    #[cfg(feature = "postgres")]
    pub fn postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match &mut self.conn {
            Borrowed::Postgres { conn, .. } => Some(&mut **conn),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The SQLite connection, when the transaction is on SQLite.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(&mut self) -> Option<&mut sqlx::SqliteConnection> {
        match &mut self.conn {
            Borrowed::Sqlite(conn) => Some(&mut **conn),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

impl<'c> Borrowed<'c> {
    fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "postgres")]
            Borrowed::Postgres { .. } => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            Borrowed::Sqlite(_) => Backend::Sqlite,
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Borrowed::Never(never, _) => match *never {},
        }
    }

    fn reborrow(&mut self) -> Borrowed<'_> {
        match self {
            #[cfg(feature = "postgres")]
            Borrowed::Postgres { conn, persistent } => Borrowed::Postgres {
                conn,
                persistent: *persistent,
            },
            #[cfg(feature = "sqlite")]
            Borrowed::Sqlite(conn) => Borrowed::Sqlite(conn),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Borrowed::Never(never, _) => match *never {},
        }
    }

    fn query(self, sql: &'c str) -> Query<'c> {
        let inner = match self {
            #[cfg(feature = "postgres")]
            Borrowed::Postgres { conn, persistent } => {
                QueryOn::Postgres(conn, sqlx::query(sql).persistent(persistent))
            }
            #[cfg(feature = "sqlite")]
            Borrowed::Sqlite(conn) => QueryOn::Sqlite(conn, sqlx::query(sql)),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Borrowed::Never(never, _) => match never {},
        };
        Query { inner }
    }

    fn caller(self) -> CallerTx<'c> {
        match self {
            #[cfg(feature = "postgres")]
            Borrowed::Postgres { conn, .. } => CallerTx::Postgres(conn),
            #[cfg(feature = "sqlite")]
            Borrowed::Sqlite(conn) => CallerTx::Sqlite(conn),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            Borrowed::Never(never, _) => match never {},
        }
    }
}

/// The caller's own statement on a [`Tx`] or [`TxConn`]: bind its
/// parameters in order, then run it.
///
/// One SQL text serves both engines: write parameters as `$1`, `$2` …
/// (sqlx's SQLite driver binds `$N` to the N-th value, as PostgreSQL does)
/// and keep to the SQL both speak (no `$1::uuid` casts, no `RETURNING` on
/// a SQLite older than 3.35). The statement runs as the transaction's
/// login, with its own `search_path` on PostgreSQL: a table is named as on
/// the caller's own pool.
///
/// ```no_run
/// # async fn f(tx: &mut drover_store::tx::Tx) -> drover_core::Result<()> {
/// tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)")
///     .bind(7_i64)
///     .bind(1250_i64)
///     .execute()
///     .await?;
/// let row = tx.query("SELECT total FROM orders WHERE id = $1").bind(7_i64).fetch_one().await?;
/// let total: i64 = row.try_get("total")?;
/// # Ok(()) }
/// ```
#[must_use = "a query does nothing until run"]
pub struct Query<'q> {
    inner: QueryOn<'q>,
}

enum QueryOn<'q> {
    #[cfg(feature = "postgres")]
    Postgres(
        &'q mut sqlx::PgConnection,
        sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ),
    #[cfg(feature = "sqlite")]
    Sqlite(
        &'q mut sqlx::SqliteConnection,
        sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ),
    #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
    Never(std::convert::Infallible, std::marker::PhantomData<&'q ()>),
}

impl std::fmt::Debug for Query<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Query(..)")
    }
}

impl<'q> Query<'q> {
    /// Binds the next parameter (`$1` first).
    pub fn bind<T: Bind<'q>>(self, value: T) -> Self {
        let inner = match self.inner {
            #[cfg(feature = "postgres")]
            QueryOn::Postgres(c, q) => QueryOn::Postgres(c, q.bind(value)),
            #[cfg(feature = "sqlite")]
            QueryOn::Sqlite(c, q) => QueryOn::Sqlite(c, q.bind(value)),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            QueryOn::Never(never, _) => match never {},
        };
        Query { inner }
    }

    /// Runs it; returns the rows it changed.
    ///
    /// # Errors
    /// The database's error (on PostgreSQL the transaction is then aborted
    /// until rolled back, as on the caller's own connection).
    pub async fn execute(self) -> Result<u64> {
        Ok(match self.inner {
            #[cfg(feature = "postgres")]
            QueryOn::Postgres(c, q) => q.execute(c).await?.rows_affected(),
            #[cfg(feature = "sqlite")]
            QueryOn::Sqlite(c, q) => q.execute(c).await?.rows_affected(),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            QueryOn::Never(never, _) => match never {},
        })
    }

    /// Runs it; returns every row.
    ///
    /// # Errors
    /// As [`Query::execute`].
    pub async fn fetch_all(self) -> Result<Vec<Row>> {
        Ok(match self.inner {
            #[cfg(feature = "postgres")]
            QueryOn::Postgres(c, q) => q
                .fetch_all(c)
                .await?
                .into_iter()
                .map(|r| Row(RowOf::Postgres(r)))
                .collect(),
            #[cfg(feature = "sqlite")]
            QueryOn::Sqlite(c, q) => q
                .fetch_all(c)
                .await?
                .into_iter()
                .map(|r| Row(RowOf::Sqlite(r)))
                .collect(),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            QueryOn::Never(never, _) => match never {},
        })
    }

    /// Runs it; returns the first row, if any.
    ///
    /// # Errors
    /// As [`Query::execute`].
    pub async fn fetch_optional(self) -> Result<Option<Row>> {
        Ok(match self.inner {
            #[cfg(feature = "postgres")]
            QueryOn::Postgres(c, q) => q.fetch_optional(c).await?.map(|r| Row(RowOf::Postgres(r))),
            #[cfg(feature = "sqlite")]
            QueryOn::Sqlite(c, q) => q.fetch_optional(c).await?.map(|r| Row(RowOf::Sqlite(r))),
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            QueryOn::Never(never, _) => match never {},
        })
    }

    /// Runs it; returns the first row.
    ///
    /// # Errors
    /// As [`Query::execute`]; [`Error::NotFound`](drover_core::Error::NotFound)
    /// when it returns none.
    pub async fn fetch_one(self) -> Result<Row> {
        self.fetch_optional()
            .await?
            .ok_or_else(|| drover_core::Error::NotFound("the statement returned no row".into()))
    }
}

/// A row a [`Query`] returned, either engine.
pub struct Row(RowOf);

enum RowOf {
    #[cfg(feature = "postgres")]
    Postgres(sqlx::postgres::PgRow),
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::sqlite::SqliteRow),
    #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
    Never(std::convert::Infallible),
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Row(..)")
    }
}

impl Row {
    /// Decodes the column `index` (a name or a position from 0).
    ///
    /// # Errors
    /// [`Error::Storage`](drover_core::Error::Storage) for no such column or
    /// a value that does not decode as `T`.
    pub fn try_get<'r, T: Decode<'r>, I: Column>(&'r self, index: I) -> Result<T> {
        use sqlx::Row as _;
        Ok(match &self.0 {
            #[cfg(feature = "postgres")]
            RowOf::Postgres(r) => r.try_get(index)?,
            #[cfg(feature = "sqlite")]
            RowOf::Sqlite(r) => r.try_get(index)?,
            #[cfg(not(any(feature = "postgres", feature = "sqlite")))]
            RowOf::Never(never) => match *never {},
        })
    }
}
