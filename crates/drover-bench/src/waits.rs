//! The soak's wait record: what every session of the run's database was
//! doing, read from `pg_stat_activity` every [`WAIT_EVERY`] and named by
//! the drover statement it runs (the store's statement files, embedded by
//! the build script), beside what tells the machine's share apart: a
//! one-row commit and a `SELECT 1`, each timed every [`PROBE_EVERY`] on a
//! session of its own and touching no drover table, the kernel's pressure
//! stall counters (`/proc/pressure`) and the server's WAL and checkpoint
//! counters, read every second.
//!
//! [`crate::stalls`] turns the record into `waits.csv` (every window) and
//! `stalls.txt` (every window whose claim p99 passed the stall line: what
//! each session waited on, and where that places the stall).
//!
//! Invariants: the sampler, the probes and the counters each hold one
//! connection of their own for the whole run (`application_name`
//! `drover-soak-*`, left out of the record), never a pooled one, so they
//! never wait for a worker's connection and never count as drover's; a
//! sample keeps when it was asked and how long the server took to answer,
//! so a stalled sample is evidence in the record, not a gap in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor, PgPool, Row};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

include!(concat!(env!("OUT_DIR"), "/statements.rs"));

/// The interval between two reads of `pg_stat_activity`.
pub const WAIT_EVERY: Duration = Duration::from_millis(20);
/// The interval between two commit probes (and two `SELECT 1` probes).
pub const PROBE_EVERY: Duration = Duration::from_millis(50);
/// The interval between two reads of the pressure, WAL and checkpoint
/// counters.
pub const COUNTERS_EVERY: Duration = Duration::from_secs(1);
/// Characters of a statement compared when naming it.
const SIGNATURE_CHARS: usize = 160;
/// A statement is named by a file when their texts agree on at least this
/// many characters (or on all of the shorter one).
const MIN_AGREEMENT: usize = 48;

/// Names the statement a session runs: the stem of the store's statement
/// file whose text (comments dropped, schema removed, whitespace folded)
/// agrees longest with it; a statement of no file by its first keyword
/// (`COMMIT`, `BEGIN`, `LISTEN`, `VACUUM`, ...) or its first characters.
#[derive(Debug, Clone)]
pub struct Catalog {
    schema: String,
    files: Vec<(&'static str, String)>,
}

impl Catalog {
    /// The catalog of the store's PostgreSQL statements, for a sandbox
    /// schema `schema`.
    pub fn new(schema: &str) -> Catalog {
        Catalog::of(schema, STATEMENTS)
    }

    /// A catalog of the given (name, SQL) pairs (tests).
    pub fn of(schema: &str, statements: &[(&'static str, &str)]) -> Catalog {
        let files = statements
            .iter()
            .map(|(name, sql)| (*name, fold(sql, "{schema}")))
            .filter(|(_, text)| !text.is_empty())
            .collect();
        Catalog {
            schema: schema.to_owned(),
            files,
        }
    }

    /// The phase a session's current (or, idle, last) statement names.
    pub fn phase(&self, query: &str) -> String {
        let q = fold(query, &self.schema);
        if q.is_empty() {
            return "(none)".into();
        }
        let mut best: Option<(&str, usize)> = None;
        for (name, text) in &self.files {
            let agree = text
                .chars()
                .zip(q.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let needed = MIN_AGREEMENT
                .min(text.chars().count())
                .min(q.chars().count());
            if agree >= needed && best.is_none_or(|(_, b)| agree > b) {
                best = Some((name, agree));
            }
        }
        if let Some((name, _)) = best {
            return name.to_owned();
        }
        let first = q.split_whitespace().next().unwrap_or_default();
        match first {
            "commit" | "begin" | "rollback" | "listen" | "unlisten" | "vacuum" | "analyze"
            | "notify" | "set" | "reset" | "discard" | "deallocate" => first.to_uppercase(),
            _ => q.chars().take(40).collect(),
        }
    }
}

/// A statement's text as compared: whole-line comments dropped, the schema
/// qualifier (`"schema".`) removed, whitespace folded to single spaces,
/// lower case, at most [`SIGNATURE_CHARS`] characters.
fn fold(sql: &str, schema: &str) -> String {
    let qualifier = format!("\"{schema}\".");
    let mut out = String::new();
    for line in sql.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("--") {
            continue;
        }
        for word in line.replace(&qualifier, "").split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&word.to_lowercase());
        }
        if out.chars().count() >= SIGNATURE_CHARS {
            break;
        }
    }
    out.chars().take(SIGNATURE_CHARS).collect()
}

/// Interned strings: a record of 30,000 samples of 30 sessions keeps four
/// small numbers per session seen, not four strings.
#[derive(Debug, Default, Clone)]
pub struct Names {
    list: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Names {
    /// The id of `s`, added if new.
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
    }

    /// The string of `id` (empty for an unknown id).
    pub fn get(&self, id: u32) -> &str {
        self.list.get(id as usize).map_or("", String::as_str)
    }
}

/// One session as one sample saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    /// The backend's process id.
    pub pid: i32,
    /// `backend_type` (client backend, walwriter, checkpointer, ...).
    pub who: u32,
    /// The statement's phase ([`Catalog::phase`]); background processes
    /// have none.
    pub phase: u32,
    /// `state` (active, idle, idle in transaction, ...).
    pub state: u32,
    /// `wait_event_type:wait_event`, `CPU` for an active session waiting
    /// on nothing, `-` for one that is not active and waits on nothing.
    pub wait: u32,
    /// How long the session had been in that state, ms.
    pub for_ms: f32,
}

/// One read of `pg_stat_activity`.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitSample {
    /// When it was asked, unix ns.
    pub asked_ns: i64,
    /// How long the server took to answer, ms.
    pub took_ms: f32,
    /// Every other session of the database and every background process.
    pub seen: Vec<Seen>,
}

/// One read of the kernel's and the server's counters (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// When they were read, unix ns.
    pub t_ns: i64,
    /// `/proc/pressure/cpu` `some` total, µs (0 where absent).
    pub cpu_some_us: u64,
    /// `/proc/pressure/io` `some` total, µs.
    pub io_some_us: u64,
    /// `/proc/pressure/io` `full` total, µs.
    pub io_full_us: u64,
    /// `pg_stat_wal.wal_sync`: WAL flushes to disk.
    pub wal_syncs: i64,
    /// `pg_stat_wal.wal_write`: WAL buffer writes.
    pub wal_writes: i64,
    /// `pg_stat_wal.wal_bytes`: WAL written, bytes.
    pub wal_bytes: i64,
    /// `checkpoints_timed + checkpoints_req` of `pg_stat_bgwriter`.
    pub checkpoints: i64,
}

/// A timed probe: when it returned (unix ns) and how long it took (ms).
pub type Timed = (i64, f64);

/// What the sampler, the probes and the counters recorded.
#[derive(Debug, Default, Clone)]
pub struct WaitRecord {
    /// The strings the samples' ids name.
    pub names: Names,
    /// Every read of `pg_stat_activity`, in time order.
    pub samples: Vec<WaitSample>,
    /// Every commit probe.
    pub commits: Vec<Timed>,
    /// Every `SELECT 1` probe.
    pub selects: Vec<Timed>,
    /// Every read of the counters.
    pub counters: Vec<Counters>,
}

/// The running sampler, probes and counter reader.
pub(crate) struct Waits {
    record: Arc<Mutex<WaitRecord>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Waits {
    /// Opens their four connections through `admin` (a superuser pool on
    /// the run's database) and starts them; each stops at `stop`.
    pub async fn start(
        admin: &PgPool,
        schema: &str,
        stop: &CancellationToken,
    ) -> Result<Waits, crate::BenchError> {
        let record = Arc::new(Mutex::new(WaitRecord::default()));
        let mut sampler = own_connection(admin, "drover-soak-waits").await?;
        let mut committer = own_connection(admin, "drover-soak-commit").await?;
        let selecter = own_connection(admin, "drover-soak-select").await?;
        let counter = own_connection(admin, "drover-soak-counters").await?;
        // In `public`, not the sandbox: the soak's table samples list the
        // sandbox's tables, and this one is not drover's.
        committer
            .execute("CREATE TABLE IF NOT EXISTS public.drover_soak_commit_probe (at timestamptz)")
            .await?;
        sampler
            .execute("SET track_activity_query_size = 4096")
            .await
            .ok();
        let catalog = Catalog::new(schema);
        let tasks = vec![
            tokio::spawn(sample_loop(sampler, catalog, record.clone(), stop.clone())),
            tokio::spawn(probe_loop(
                committer,
                "INSERT INTO public.drover_soak_commit_probe VALUES (now())",
                record.clone(),
                true,
                stop.clone(),
            )),
            tokio::spawn(probe_loop(
                selecter,
                "SELECT 1",
                record.clone(),
                false,
                stop.clone(),
            )),
            tokio::spawn(counter_loop(counter, record.clone(), stop.clone())),
        ];
        Ok(Waits { record, tasks })
    }

    /// Waits for every task to stop (after `stop`) and answers the record.
    pub async fn finish(self) -> WaitRecord {
        for t in self.tasks {
            let _ = t.await;
        }
        std::mem::take(&mut *self.record.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A connection outside the pool, named so the sampler leaves it out.
async fn own_connection(admin: &PgPool, name: &str) -> Result<PgConnection, crate::BenchError> {
    let mut conn = admin.acquire().await?.detach();
    conn.execute(format!("SET application_name = '{name}'").as_str())
        .await?;
    Ok(conn)
}

const ACTIVITY: &str = "\
SELECT pid, coalesce(backend_type, ''), coalesce(state, ''), \
       coalesce(wait_event_type, ''), coalesce(wait_event, ''), coalesce(query, ''), \
       coalesce(extract(epoch FROM clock_timestamp() - state_change) * 1000, 0)::float8 \
FROM pg_stat_activity \
WHERE pid <> pg_backend_pid() \
  AND coalesce(application_name, '') NOT LIKE 'drover-soak-%' \
  AND (datname = current_database() OR datname IS NULL)";

async fn sample_loop(
    mut conn: PgConnection,
    catalog: Catalog,
    record: Arc<Mutex<WaitRecord>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(WAIT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Phases by query text: the same few dozen texts come back every read.
    let mut phases: HashMap<String, String> = HashMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let asked_ns = crate::unix_nanos();
        let t = Instant::now();
        let rows = match sqlx::query(ACTIVITY).fetch_all(&mut conn).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "soak wait sample failed");
                continue;
            }
        };
        let took_ms = t.elapsed().as_secs_f32() * 1e3;
        let mut seen = Vec::with_capacity(rows.len());
        let mut rec = record.lock().unwrap_or_else(|p| p.into_inner());
        for r in rows {
            let (Ok(pid), Ok(who), Ok(state), Ok(wtype), Ok(wevent), Ok(query), Ok(for_ms)) = (
                r.try_get::<i32, _>(0),
                r.try_get::<String, _>(1),
                r.try_get::<String, _>(2),
                r.try_get::<String, _>(3),
                r.try_get::<String, _>(4),
                r.try_get::<String, _>(5),
                r.try_get::<f64, _>(6),
            ) else {
                continue;
            };
            let phase = if who == "client backend" {
                phases
                    .entry(query)
                    .or_insert_with_key(|q| catalog.phase(q))
                    .clone()
            } else {
                String::new()
            };
            let wait = wait_label(&state, &wtype, &wevent);
            seen.push(Seen {
                pid,
                who: rec.names.id(&who),
                phase: rec.names.id(&phase),
                state: rec.names.id(&state),
                wait: rec.names.id(&wait),
                for_ms: for_ms as f32,
            });
        }
        rec.samples.push(WaitSample {
            asked_ns,
            took_ms,
            seen,
        });
        drop(rec);
        if phases.len() > 10_000 {
            // Texts with literals in them would grow this without bound.
            phases.clear();
        }
    }
    let _ = conn.close().await;
}

/// `type:event`; an active session waiting on nothing is on the CPU (or
/// runnable), any other waits on nothing.
pub fn wait_label(state: &str, wtype: &str, wevent: &str) -> String {
    match (wtype.is_empty(), state) {
        (false, _) => format!("{wtype}:{wevent}"),
        (true, "active") => "CPU".into(),
        (true, _) => "-".into(),
    }
}

async fn probe_loop(
    mut conn: PgConnection,
    sql: &'static str,
    record: Arc<Mutex<WaitRecord>>,
    commits: bool,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let t = Instant::now();
        let ok = conn.execute(sql).await;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = ok {
            tracing::warn!(error = %e, sql, "soak probe failed");
        }
        // Recorded failed or not: a probe that failed after a long wait is
        // the wait.
        let mut rec = record.lock().unwrap_or_else(|p| p.into_inner());
        let list = if commits {
            &mut rec.commits
        } else {
            &mut rec.selects
        };
        list.push((crate::unix_nanos(), ms));
    }
    let _ = conn.close().await;
}

const SERVER_COUNTERS: &str = "\
SELECT (SELECT wal_sync FROM pg_stat_wal)::bigint, (SELECT wal_write FROM pg_stat_wal)::bigint, \
       (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)::bigint, \
       (SELECT wal_bytes FROM pg_stat_wal)::bigint";

async fn counter_loop(
    mut conn: PgConnection,
    record: Arc<Mutex<WaitRecord>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(COUNTERS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let t_ns = crate::unix_nanos();
        let (cpu_some_us, _) = pressure("cpu");
        let (io_some_us, io_full_us) = pressure("io");
        let server = sqlx::query(SERVER_COUNTERS).fetch_one(&mut conn).await;
        let (wal_syncs, wal_writes, checkpoints, wal_bytes) = match server {
            Ok(r) => (
                r.try_get(0).unwrap_or(0),
                r.try_get(1).unwrap_or(0),
                r.try_get(2).unwrap_or(0),
                r.try_get(3).unwrap_or(0),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "soak counters failed");
                continue;
            }
        };
        record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .counters
            .push(Counters {
                t_ns,
                cpu_some_us,
                io_some_us,
                io_full_us,
                wal_syncs,
                wal_writes,
                wal_bytes,
                checkpoints,
            });
    }
    let _ = conn.close().await;
}

/// The `some` and `full` totals (µs) of `/proc/pressure/<what>`; zeros where
/// the kernel has none.
fn pressure(what: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/pressure/{what}")).unwrap_or_default();
    parse_pressure(&text)
}

/// Parses the `total=` of the `some` and `full` lines of a pressure file.
pub fn parse_pressure(text: &str) -> (u64, u64) {
    let total = |kind: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(kind))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("total=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (total("some"), total("full"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_named_by_its_file_with_comments_and_schema_left_out() {
        let files: &[(&'static str, &str)] = &[
            (
                "item_claim",
                "-- Claim: one round trip.\nSELECT id, lane, kind, payload, attempts\n  FROM \"{schema}\".claim_items($1, $2, $3, $4, $5)",
            ),
            (
                "item_complete_many",
                "-- Batched completion.\nSELECT id FROM \"{schema}\".complete_items($1, $2, $3) AS t(id)",
            ),
            (
                "item_complete_many_results",
                "SELECT id FROM \"{schema}\".complete_items_results($1, $2, $3, $4) AS t(id)",
            ),
        ];
        let c = Catalog::of("drover_bench_x", files);
        assert_eq!(
            c.phase(
                "-- Claim: one round trip.\nSELECT id, lane, kind, payload, attempts\n  FROM \"drover_bench_x\".claim_items($1, $2, $3, $4, $5)"
            ),
            "item_claim"
        );
        assert_eq!(
            c.phase(
                "SELECT id FROM \"drover_bench_x\".complete_items_results($1, $2, $3, $4) AS t(id)"
            ),
            "item_complete_many_results"
        );
        assert_eq!(
            c.phase("SELECT id FROM \"drover_bench_x\".complete_items($1, $2, $3) AS t(id)"),
            "item_complete_many"
        );
        assert_eq!(c.phase("COMMIT"), "COMMIT");
        assert_eq!(c.phase("  listen \"drover_x\""), "LISTEN");
        assert_eq!(c.phase(""), "(none)");
        assert_eq!(
            c.phase("SELECT count(*) FROM items WHERE status = 'pending'"),
            "select count(*) from items where status "
        );
    }

    #[test]
    fn waits_are_labelled_cpu_only_when_active() {
        assert_eq!(wait_label("active", "", ""), "CPU");
        assert_eq!(
            wait_label("idle", "Client", "ClientRead"),
            "Client:ClientRead"
        );
        assert_eq!(wait_label("idle", "", ""), "-");
        assert_eq!(wait_label("active", "IO", "WALSync"), "IO:WALSync");
    }

    #[test]
    fn pressure_totals_are_read_from_both_lines() {
        let text = "some avg10=0.41 avg60=0.88 avg300=1.32 total=7926086\n\
                    full avg10=0.16 avg60=0.72 avg300=1.19 total=7179514\n";
        assert_eq!(parse_pressure(text), (7_926_086, 7_179_514));
        assert_eq!(parse_pressure(""), (0, 0));
    }

    #[test]
    fn names_intern_each_string_once() {
        let mut n = Names::default();
        let a = n.id("active");
        let b = n.id("idle");
        assert_eq!(n.id("active"), a);
        assert_ne!(a, b);
        assert_eq!(n.get(b), "idle");
        assert_eq!(n.get(99), "");
    }
}
