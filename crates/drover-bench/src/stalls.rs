//! Placing the soak's stalls from its wait record ([`crate::waits`]).
//!
//! A window *stalled* when its probe-claim p99 is above [`STALL_FACTOR`]
//! times the run's median claim p50 (the median over the windows' p50s).
//! For every window this writes `waits.csv` (the machine's probes and
//! counters beside the claim figures); for every stalled window,
//! `stalls.txt`: what each session waited on over the window and during
//! its slowest claim, and a [`Place`]: the stall as drover's (a lock, a
//! statement on the CPU, the worker process not answering its sessions) or
//! the machine's (every commit waited on the WAL flush, the commit probe
//! on its own table with them; nothing answered at all; CPU or IO
//! pressure).
//!
//! Invariants: the placing reads only the record (no clock, no database),
//! so a record placed twice is placed alike; a window with no probe claim
//! is never stalled.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::{Percentiles, SoakRow};
use crate::waits::{Counters, Names, Timed, WaitRecord, WaitSample};

/// A window stalled when its claim p99 passed this many times the run's
/// median claim p50 (the "10x").
pub const STALL_FACTOR: f64 = 10.0;
/// The waits that mean a backend is writing or flushing the WAL.
const WAL_WAITS: &[&str] = &[
    "IO:WALSync",
    "IO:WALWrite",
    "IO:WALInitSync",
    "IO:WALInitWrite",
    "LWLock:WALWrite",
    "LWLock:WALInsert",
    "LWLock:WALBufMapping",
];

/// Where a stalled window's wait was.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// The sampler's own read and `SELECT 1` waited as long as the claim:
    /// the server (or the machine under it) answered nothing.
    NothingAnswered,
    /// Sessions waited on writing or flushing the WAL: the machine's disk.
    WalFlush {
        /// The commit probe, which touches no drover table, waited with
        /// them (without it, no probe commit fell in the flush).
        probe: bool,
    },
    /// Drover's sessions waited on a heavyweight lock.
    Lock {
        /// The statement that waited.
        phase: String,
        /// The lock's wait event.
        wait: String,
    },
    /// Drover's sessions waited on a server lightweight lock or IO other
    /// than the WAL.
    Server {
        /// The statement that waited.
        phase: String,
        /// The wait event.
        wait: String,
    },
    /// Sessions sat idle in a transaction, waiting for the worker process
    /// to send its next statement: the wait was in the process.
    Client {
        /// The statement the sessions had last run.
        phase: String,
    },
    /// Drover's statements were on the CPU and the machine's CPU was not
    /// under pressure: the statement's own work.
    Statement {
        /// The statement.
        phase: String,
    },
    /// The CPU was under pressure (runnable tasks waited for a core more
    /// than half the window).
    CpuPressure,
    /// No session was busy while the claim waited: the wait was in the
    /// probe's process (its pool, its runtime) before or after the server.
    NoSessionBusy,
}

impl Place {
    /// Whose the stall is: `machine`, `drover` or `process`.
    pub fn owner(&self) -> &'static str {
        match self {
            Place::NothingAnswered | Place::WalFlush { .. } | Place::CpuPressure => "machine",
            Place::Lock { .. } | Place::Server { .. } | Place::Statement { .. } => "drover",
            Place::Client { .. } | Place::NoSessionBusy => "process",
        }
    }

    /// One line saying what was seen.
    pub fn describe(&self) -> String {
        match self {
            Place::NothingAnswered => {
                "machine: nothing answered (the sampler's own read and SELECT 1 waited too)".into()
            }
            Place::WalFlush { probe: true } => {
                "machine: WAL flush (sessions waited on the WAL, the commit probe on a table of its own with them)".into()
            }
            Place::WalFlush { probe: false } => {
                "machine: WAL flush (sessions waited on the WAL; no probe commit fell in it)".into()
            }
            Place::Lock { phase, wait } => format!("drover: lock {wait} in {phase}"),
            Place::Server { phase, wait } => format!("drover: {wait} in {phase}"),
            Place::Client { phase } => format!(
                "process: sessions idle in transaction after {phase}, waiting for the worker to send"
            ),
            Place::Statement { phase } => format!("drover: {phase} on the CPU"),
            Place::CpuPressure => "machine: CPU pressure (runnable tasks waited for a core)".into(),
            Place::NoSessionBusy => {
                "process: no session was busy while the claim waited (pool or runtime)".into()
            }
        }
    }
}

/// The figures of one window, stalled or not (one line of `waits.csv`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowWaits {
    /// End of the window, s since the start.
    pub t_s: f64,
    /// The probe's claims.
    pub claim: Percentiles,
    /// The commit probe.
    pub commit: Percentiles,
    /// The `SELECT 1` probe.
    pub select: Percentiles,
    /// The sampler's slowest read, ms.
    pub sampler_max_ms: f64,
    /// CPU pressure (`some`), ms per s of the window.
    pub cpu_some_ms_per_s: f64,
    /// IO pressure (`some`), ms per s.
    pub io_some_ms_per_s: f64,
    /// IO pressure (`full`), ms per s.
    pub io_full_ms_per_s: f64,
    /// WAL flushes in the window.
    pub wal_syncs: i64,
    /// WAL written in the window, KiB.
    pub wal_kib: i64,
    /// Checkpoints begun in the window.
    pub checkpoints: i64,
    /// Where the stall was, for a stalled window.
    pub place: Option<Place>,
}

/// The stall line of a run: [`STALL_FACTOR`] times the median of the
/// windows' claim p50s (windows with claims only); `None` without claims.
pub fn stall_line(rows: &[SoakRow]) -> Option<f64> {
    let p50s: Vec<f64> = rows
        .iter()
        .filter(|r| r.claim.count > 0)
        .map(|r| r.claim.p50)
        .collect();
    if p50s.is_empty() {
        return None;
    }
    Some(STALL_FACTOR * Percentiles::of(p50s).p50)
}

/// The stalled windows of `windows` counted by where each was placed
/// ([`Place::describe`]), in that text's order.
pub fn by_place(windows: &[WindowWaits]) -> Vec<(String, usize)> {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for p in windows.iter().filter_map(|w| w.place.as_ref()) {
        *by.entry(p.describe()).or_default() += 1;
    }
    by.into_iter().collect()
}

/// The samples asked in `[lo, hi)` (the record is in time order).
fn between(samples: &[WaitSample], lo: i64, hi: i64) -> &[WaitSample] {
    let a = samples.partition_point(|s| s.asked_ns < lo);
    let b = samples.partition_point(|s| s.asked_ns < hi);
    &samples[a..b.max(a)]
}

fn timed_between(list: &[Timed], lo: i64, hi: i64) -> Percentiles {
    Percentiles::of(
        list.iter()
            .filter(|(t, _)| *t >= lo && *t < hi)
            .map(|(_, ms)| *ms)
            .collect(),
    )
}

/// One (phase, state, wait) over some samples: sessions in it on average,
/// and the longest any was in that state.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// The statement (or the background process's type).
    pub phase: String,
    /// The session's state.
    pub state: String,
    /// What it waited on.
    pub wait: String,
    /// Sessions in it, mean over the samples.
    pub mean: f64,
    /// The longest time one was in that state, ms.
    pub longest_ms: f64,
}

/// The tallies of `samples`, busiest first; idle sessions (a pool's
/// connections between statements) are left out.
pub fn tally(names: &Names, samples: &[WaitSample]) -> Vec<Tally> {
    let mut by: BTreeMap<(u32, u32, u32), (u64, f32)> = BTreeMap::new();
    for s in samples {
        for x in &s.seen {
            // Idle clients and background processes idle in their main
            // loops are not part of any wait.
            if names.get(x.state) == "idle" || names.get(x.wait).starts_with("Activity:") {
                continue;
            }
            // Background processes have no statement: their type names them.
            let phase = if names.get(x.phase).is_empty() {
                x.who
            } else {
                x.phase
            };
            let e = by.entry((phase, x.state, x.wait)).or_insert((0, 0.0));
            e.0 += 1;
            e.1 = e.1.max(x.for_ms);
        }
    }
    let n = samples.len().max(1) as f64;
    let mut out: Vec<Tally> = by
        .into_iter()
        .map(|((p, s, w), (count, longest))| Tally {
            phase: names.get(p).to_owned(),
            state: names.get(s).to_owned(),
            wait: names.get(w).to_owned(),
            mean: count as f64 / n,
            longest_ms: f64::from(longest),
        })
        .collect();
    out.sort_by(|a, b| b.mean.total_cmp(&a.mean).then(a.phase.cmp(&b.phase)));
    out
}

/// What [`place`] decides from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// The window's slowest claim, ms.
    pub claim_max_ms: f64,
    /// The commit probe's slowest in the window, against the run's median.
    pub commit_max_ms: f64,
    /// The run's median commit probe, ms.
    pub commit_median_ms: f64,
    /// The `SELECT 1` probe's slowest in the window.
    pub select_max_ms: f64,
    /// The run's median `SELECT 1`, ms.
    pub select_median_ms: f64,
    /// The sampler's slowest read in the window, ms.
    pub sampler_max_ms: f64,
    /// CPU pressure in the window, ms per s.
    pub cpu_some_ms_per_s: f64,
    /// The tallies of drover's sessions (client backends) during the
    /// window's slowest claim.
    pub during: Vec<Tally>,
}

/// Where a stalled window's wait was, from its evidence (the rules are in
/// the order they are tried; the first that holds places it).
pub fn place(e: &Evidence) -> Place {
    let stalled = |max: f64, median: f64| max > STALL_FACTOR * median.max(0.05);
    let busy: Vec<&Tally> = e.during.iter().filter(|t| t.state != "idle").collect();
    let top_waiting = busy.iter().find(|t| t.wait != "CPU" && t.wait != "-");
    let commit_stalled = stalled(e.commit_max_ms, e.commit_median_ms);
    if stalled(e.select_max_ms, e.select_median_ms)
        && e.sampler_max_ms > (e.claim_max_ms / 2.0).max(50.0)
    {
        return Place::NothingAnswered;
    }
    let wal = |t: &&&Tally| WAL_WAITS.contains(&t.wait.as_str()) || t.phase == "COMMIT";
    // The WAL first: a commit queued behind a slow flush holds its row and
    // notify locks meanwhile, so the lock waits that follow are its echo.
    if busy.iter().take(3).any(|t| wal(&t)) || (commit_stalled && busy.iter().any(|t| wal(&t))) {
        return Place::WalFlush {
            probe: commit_stalled,
        };
    }
    if let Some(t) = top_waiting {
        if t.wait.starts_with("Lock:") {
            return Place::Lock {
                phase: t.phase.clone(),
                wait: t.wait.clone(),
            };
        }
        if t.state.starts_with("idle in transaction") {
            return Place::Client {
                phase: t.phase.clone(),
            };
        }
        if t.wait != "Client:ClientRead" {
            return Place::Server {
                phase: t.phase.clone(),
                wait: t.wait.clone(),
            };
        }
    }
    if e.cpu_some_ms_per_s > 500.0 {
        return Place::CpuPressure;
    }
    match busy.iter().find(|t| t.wait == "CPU") {
        Some(t) => Place::Statement {
            phase: t.phase.clone(),
        },
        None => Place::NoSessionBusy,
    }
}

/// The counters' growth over `[lo, hi)`: the last read before `hi` less the
/// last read before `lo` (zeros without two reads).
fn counters_between(c: &[Counters], lo: i64, hi: i64) -> (Counters, f64) {
    let before = |t: i64| c.iter().rev().find(|x| x.t_ns <= t).copied();
    match (before(lo).or_else(|| c.first().copied()), before(hi)) {
        (Some(a), Some(b)) if b.t_ns > a.t_ns => (
            Counters {
                t_ns: b.t_ns,
                cpu_some_us: b.cpu_some_us.saturating_sub(a.cpu_some_us),
                io_some_us: b.io_some_us.saturating_sub(a.io_some_us),
                io_full_us: b.io_full_us.saturating_sub(a.io_full_us),
                wal_syncs: b.wal_syncs - a.wal_syncs,
                wal_writes: b.wal_writes - a.wal_writes,
                wal_bytes: b.wal_bytes - a.wal_bytes,
                checkpoints: b.checkpoints - a.checkpoints,
            },
            (b.t_ns - a.t_ns) as f64 / 1e9,
        ),
        _ => (Counters::default(), 0.0),
    }
}

/// The whole analysis of a run: every window's figures, and the text of
/// `stalls.txt`.
#[derive(Debug, Clone, Default)]
pub struct Stalls {
    /// One per soak row, in order.
    pub windows: Vec<WindowWaits>,
    /// The stall line, ms (`None`: no claims).
    pub line_ms: Option<f64>,
    /// `stalls.txt`.
    pub text: String,
}

impl Stalls {
    /// The stalled windows.
    pub fn stalled(&self) -> impl Iterator<Item = &WindowWaits> {
        self.windows.iter().filter(|w| w.place.is_some())
    }
}

/// Analyses a run: `rows` its soak rows, `claims` its probe claims (end,
/// ms), `start_ns` its start, `window_ns` the rows' width.
pub fn analyse(
    rows: &[SoakRow],
    claims: &[Timed],
    record: &WaitRecord,
    start_ns: i64,
    window_ns: i64,
) -> Stalls {
    let line = stall_line(rows);
    let commit_median = Percentiles::of(record.commits.iter().map(|c| c.1).collect()).p50;
    let select_median = Percentiles::of(record.selects.iter().map(|c| c.1).collect()).p50;
    let mut windows = Vec::with_capacity(rows.len());
    let mut details = String::new();
    let mut calm: Vec<WaitSample> = Vec::new();
    for r in rows {
        let hi = start_ns + (r.t_s * 1e9) as i64;
        let lo = hi - window_ns;
        let samples = between(&record.samples, lo, hi);
        let (grown, secs) = counters_between(&record.counters, lo, hi);
        let per_s = |us: u64| {
            if secs > 0.0 {
                us as f64 / 1e3 / secs
            } else {
                0.0
            }
        };
        let mut w = WindowWaits {
            t_s: r.t_s,
            claim: r.claim,
            commit: timed_between(&record.commits, lo, hi),
            select: timed_between(&record.selects, lo, hi),
            sampler_max_ms: samples
                .iter()
                .map(|s| f64::from(s.took_ms))
                .fold(0.0, f64::max),
            cpu_some_ms_per_s: per_s(grown.cpu_some_us),
            io_some_ms_per_s: per_s(grown.io_some_us),
            io_full_ms_per_s: per_s(grown.io_full_us),
            wal_syncs: grown.wal_syncs,
            wal_kib: grown.wal_bytes / 1024,
            checkpoints: grown.checkpoints,
            place: None,
        };
        let stalled = line.is_some_and(|l| r.claim.count > 0 && r.claim.p99 > l);
        if !stalled {
            calm.extend(samples.iter().cloned());
            windows.push(w);
            continue;
        }
        // The window's slowest claim, and the samples asked while it ran.
        let slowest = claims
            .iter()
            .filter(|(t, _)| *t >= lo && *t < hi)
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((hi, 0.0));
        let began = slowest.0 - (slowest.1 * 1e6) as i64;
        let mut during = between(&record.samples, began, slowest.0);
        if during.is_empty() {
            let i = record
                .samples
                .partition_point(|s| s.asked_ns < began)
                .min(record.samples.len().saturating_sub(1));
            during = record.samples.get(i..=i).unwrap_or(&[]);
        }
        let during_tally: Vec<Tally> = tally(&record.names, during)
            .into_iter()
            .filter(is_statement)
            .collect();
        let evidence = Evidence {
            claim_max_ms: r.claim.max,
            commit_max_ms: w.commit.max,
            commit_median_ms: commit_median,
            select_max_ms: w.select.max,
            select_median_ms: select_median,
            sampler_max_ms: w.sampler_max_ms,
            cpu_some_ms_per_s: w.cpu_some_ms_per_s,
            during: during_tally.clone(),
        };
        let p = place(&evidence);
        window_text(
            &mut details,
            &w,
            &p,
            slowest,
            start_ns,
            &tally(&record.names, samples),
            &record.names,
            during,
        );
        w.place = Some(p);
        windows.push(w);
    }
    let mut text = String::new();
    header_text(
        &mut text,
        line,
        &windows,
        &tally(&record.names, &calm),
        commit_median,
        select_median,
    );
    text.push_str(&details);
    Stalls {
        windows,
        line_ms: line,
        text,
    }
}

/// A tally of a client backend's statement (drover's or the soak's own),
/// as opposed to a background process (whose phase is its type).
fn is_statement(t: &Tally) -> bool {
    !matches!(
        t.phase.as_str(),
        "walwriter"
            | "checkpointer"
            | "background writer"
            | "autovacuum launcher"
            | "autovacuum worker"
            | "logical replication launcher"
            | "archiver"
            | "startup"
    )
}

fn header_text(
    out: &mut String,
    line: Option<f64>,
    windows: &[WindowWaits],
    calm: &[Tally],
    commit_median: f64,
    select_median: f64,
) {
    let Some(line) = line else {
        out.push_str("No probe claims: no stall line.\n");
        return;
    };
    let stalled: Vec<&WindowWaits> = windows.iter().filter(|w| w.place.is_some()).collect();
    let _ = writeln!(
        out,
        "Stall line: claim p99 above {STALL_FACTOR} x the run's median claim p50 = {line:.2} ms\n\
         Windows over it: {} of {}\n\
         Probes over the run (median): commit {commit_median:.2} ms, SELECT 1 {select_median:.2} ms",
        stalled.len(),
        windows.len(),
    );
    for (what, n) in &by_place(windows) {
        let _ = writeln!(out, "  {n:>3}  {what}");
    }
    out.push_str("\nSessions in the windows under the line (mean per sample):\n");
    tally_text(out, calm, 20);
}

fn tally_text(out: &mut String, t: &[Tally], limit: usize) {
    let _ = writeln!(
        out,
        "  {:<34} {:<22} {:<28} {:>7} {:>10}",
        "statement", "state", "wait", "mean", "longest ms"
    );
    for x in t.iter().take(limit) {
        let _ = writeln!(
            out,
            "  {:<34} {:<22} {:<28} {:>7.2} {:>10.1}",
            x.phase, x.state, x.wait, x.mean, x.longest_ms
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn window_text(
    out: &mut String,
    w: &WindowWaits,
    p: &Place,
    slowest: Timed,
    start_ns: i64,
    over_window: &[Tally],
    names: &Names,
    during: &[WaitSample],
) {
    let _ = writeln!(
        out,
        "\n== window ending {:.1} s: claim p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms ({} claims)\n\
         commit probe p99 {:.2} max {:.1} ms; SELECT 1 p99 {:.2} max {:.1} ms; sampler's slowest read {:.1} ms\n\
         CPU pressure {:.0} ms/s; IO pressure some {:.0} full {:.0} ms/s; WAL flushes {}, {} KiB; checkpoints {}\n\
         place: {}",
        w.t_s,
        w.claim.p50,
        w.claim.p99,
        w.claim.max,
        w.claim.count,
        w.commit.p99,
        w.commit.max,
        w.select.p99,
        w.select.max,
        w.sampler_max_ms,
        w.cpu_some_ms_per_s,
        w.io_some_ms_per_s,
        w.io_full_ms_per_s,
        w.wal_syncs,
        w.wal_kib,
        w.checkpoints,
        p.describe(),
    );
    out.push_str("Sessions over the window (mean per sample):\n");
    tally_text(out, over_window, 15);
    let mid = during.get(during.len() / 2);
    let _ = writeln!(
        out,
        "During the slowest claim ({:.1} ms, ended at {:.3} s): {} samples; every busy session at {}:",
        slowest.1,
        (slowest.0 - start_ns) as f64 / 1e9,
        during.len(),
        mid.map_or("-".into(), |s| format!(
            "{:.3} s (read took {:.1} ms)",
            (s.asked_ns - start_ns) as f64 / 1e9,
            s.took_ms
        )),
    );
    if let Some(s) = mid {
        for x in s
            .seen
            .iter()
            .filter(|x| names.get(x.state) != "idle" && !names.get(x.wait).starts_with("Activity:"))
        {
            let phase = match names.get(x.phase) {
                "" => names.get(x.who),
                p => p,
            };
            let _ = writeln!(
                out,
                "  pid {:>7}  {:<34} {:<22} {:<28} {:>9.1} ms",
                x.pid,
                phase,
                names.get(x.state),
                names.get(x.wait),
                x.for_ms
            );
        }
    }
}

/// `waits.csv`: one line per window.
pub fn csv(windows: &[WindowWaits]) -> String {
    let mut out = String::from(
        "t_s,claim_p50_ms,claim_p99_ms,commit_p99_ms,commit_max_ms,select_p99_ms,select_max_ms,\
         sampler_max_ms,cpu_some_ms_per_s,io_some_ms_per_s,io_full_ms_per_s,wal_syncs,wal_kib,checkpoints,stalled,place\n",
    );
    for w in windows {
        let _ = writeln!(
            out,
            "{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{:.0},{:.0},{:.0},{},{},{},{},{}",
            w.t_s,
            w.claim.p50,
            w.claim.p99,
            w.commit.p99,
            w.commit.max,
            w.select.p99,
            w.select.max,
            w.sampler_max_ms,
            w.cpu_some_ms_per_s,
            w.io_some_ms_per_s,
            w.io_full_ms_per_s,
            w.wal_syncs,
            w.wal_kib,
            w.checkpoints,
            u8::from(w.place.is_some()),
            w.place.as_ref().map_or(String::new(), |p| format!(
                "\"{}\"",
                p.describe().replace('"', "'")
            )),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waits::Seen;

    fn t(phase: &str, state: &str, wait: &str, mean: f64) -> Tally {
        Tally {
            phase: phase.into(),
            state: state.into(),
            wait: wait.into(),
            mean,
            longest_ms: 100.0,
        }
    }

    fn calm() -> Evidence {
        Evidence {
            claim_max_ms: 400.0,
            commit_max_ms: 2.0,
            commit_median_ms: 1.0,
            select_max_ms: 0.3,
            select_median_ms: 0.1,
            sampler_max_ms: 3.0,
            cpu_some_ms_per_s: 50.0,
            during: vec![],
        }
    }

    #[test]
    fn each_rule_places_its_stall() {
        let mut e = calm();
        e.select_max_ms = 390.0;
        e.sampler_max_ms = 380.0;
        assert_eq!(place(&e), Place::NothingAnswered);

        let mut e = calm();
        e.commit_max_ms = 300.0;
        e.during = vec![t("COMMIT", "active", "IO:WALSync", 6.0)];
        assert_eq!(place(&e), Place::WalFlush { probe: true });
        assert_eq!(place(&e).owner(), "machine");
        e.commit_max_ms = 2.0;
        assert_eq!(place(&e), Place::WalFlush { probe: false });

        // The same waits with the commit probe unhurt are not the machine's.
        let mut e = calm();
        e.during = vec![
            t("item_claim", "active", "CPU", 1.0),
            t("item_claim", "active", "Lock:transactionid", 3.0),
        ];
        e.during.sort_by(|a, b| b.mean.total_cmp(&a.mean));
        assert_eq!(
            place(&e),
            Place::Lock {
                phase: "item_claim".into(),
                wait: "Lock:transactionid".into()
            }
        );
        assert_eq!(place(&e).owner(), "drover");

        let mut e = calm();
        e.during = vec![t(
            "item_claim",
            "idle in transaction",
            "Client:ClientRead",
            4.0,
        )];
        assert_eq!(
            place(&e),
            Place::Client {
                phase: "item_claim".into()
            }
        );

        let mut e = calm();
        e.during = vec![t("item_claim", "active", "LWLock:BufferContent", 2.0)];
        assert_eq!(place(&e).owner(), "drover");

        let mut e = calm();
        e.cpu_some_ms_per_s = 800.0;
        e.during = vec![t("item_claim", "active", "CPU", 2.0)];
        assert_eq!(place(&e), Place::CpuPressure);

        let mut e = calm();
        e.during = vec![t("item_claim", "active", "CPU", 2.0)];
        assert_eq!(
            place(&e),
            Place::Statement {
                phase: "item_claim".into()
            }
        );

        assert_eq!(place(&calm()), Place::NoSessionBusy);
    }

    #[test]
    fn the_stall_line_is_ten_times_the_median_p50_of_windows_with_claims() {
        let row = |p50: f64, count: u64| SoakRow {
            claim: Percentiles {
                count,
                p50,
                p99: p50,
                ..Percentiles::default()
            },
            ..SoakRow::default()
        };
        assert_eq!(stall_line(&[]), None);
        let rows = [row(1.0, 10), row(2.0, 10), row(3.0, 10), row(99.0, 0)];
        assert_eq!(stall_line(&rows), Some(20.0));
    }

    #[test]
    fn a_stalled_window_is_placed_from_the_samples_during_its_slowest_claim() {
        let mut names = Names::default();
        let (client, active, idle) = (
            names.id("client backend"),
            names.id("active"),
            names.id("idle"),
        );
        let (claim, commit, none) = (names.id("item_claim"), names.id("COMMIT"), names.id(""));
        let (cpu, walsync, dash) = (names.id("CPU"), names.id("IO:WALSync"), names.id("-"));
        let _ = none;
        let s = 1_000_000_000_000i64;
        let sec = 1_000_000_000i64;
        let ms = 1_000_000i64;
        // Ten windows of 5 s; every 20 ms a sample: one claim on the CPU
        // and one idle session; from 42.0 s to 42.4 s four sessions in
        // COMMIT waiting on the WAL flush.
        let mut samples = Vec::new();
        let mut at = s;
        while at < s + 50 * sec {
            let flushing = at >= s + 42 * sec && at < s + 42 * sec + 400 * ms;
            let mut seen = vec![Seen {
                pid: 1,
                who: client,
                phase: claim,
                state: idle,
                wait: dash,
                for_ms: 1.0,
            }];
            if flushing {
                for pid in 2..6 {
                    seen.push(Seen {
                        pid,
                        who: client,
                        phase: commit,
                        state: active,
                        wait: walsync,
                        for_ms: 200.0,
                    });
                }
            } else {
                seen.push(Seen {
                    pid: 2,
                    who: client,
                    phase: claim,
                    state: active,
                    wait: cpu,
                    for_ms: 0.5,
                });
            }
            samples.push(WaitSample {
                asked_ns: at,
                took_ms: 1.0,
                seen,
            });
            at += 20 * ms;
        }
        // A claim every 50 ms of 1 ms; three slow ones, the slowest (400 ms)
        // ending at 42.4 s.
        let mut claims: Vec<Timed> = (0..1000).map(|i| (s + i * 50 * ms, 1.0)).collect();
        claims.push((s + 42 * sec + 400 * ms, 400.0));
        claims.push((s + 42 * sec + 401 * ms, 350.0));
        claims.push((s + 42 * sec + 402 * ms, 300.0));
        claims.sort_by_key(|c| c.0);
        // The commit probe stalled with it; the SELECT 1 probe did not.
        let mut commits: Vec<Timed> = (0..1000).map(|i| (s + i * 50 * ms, 1.0)).collect();
        commits.push((s + 42 * sec + 410 * ms, 380.0));
        commits.sort_by_key(|c| c.0);
        let selects: Vec<Timed> = (0..1000).map(|i| (s + i * 50 * ms, 0.1)).collect();
        let record = WaitRecord {
            names,
            samples,
            commits,
            selects,
            counters: vec![],
        };
        let rows: Vec<SoakRow> = (1..=10)
            .map(|k| {
                let hi = s + k * 5 * sec;
                SoakRow {
                    t_s: (k * 5) as f64,
                    claim: Percentiles::of(
                        claims
                            .iter()
                            .filter(|c| c.0 >= hi - 5 * sec && c.0 < hi)
                            .map(|c| c.1)
                            .collect(),
                    ),
                    ..SoakRow::default()
                }
            })
            .collect();
        let st = analyse(&rows, &claims, &record, s, 5 * sec);
        assert_eq!(st.line_ms, Some(10.0));
        let stalled: Vec<&WindowWaits> = st.stalled().collect();
        assert_eq!(stalled.len(), 1, "{}", st.text);
        assert_eq!(stalled[0].t_s, 45.0);
        assert_eq!(
            stalled[0].place,
            Some(Place::WalFlush { probe: true }),
            "{}",
            st.text
        );
        assert!(st.text.contains("Windows over it: 1 of 10"), "{}", st.text);
        assert!(st.text.contains("IO:WALSync"), "{}", st.text);
        assert_eq!(csv(&st.windows).lines().count(), 11);
    }
}
