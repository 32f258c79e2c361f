//! `drover demo`: drover end to end on the embedded default, no server.
//!
//! It recreates the demo database (`sqlite://drover-demo.db` unless
//! `--database-url` names another; an SQLite file is deleted first),
//! migrates, enqueues a mix of the built-in kinds into a lane of its own,
//! drains it with an in-process worker while a progress bar runs on stderr,
//! and prints a summary: per kind done / failed / attempts / retries, the
//! dead letters with their last errors, the elapsed time and the rate.
//!
//! The mix: `drover.noop` (200 by default), 20 `drover.sleep` of 50 to
//! 200 ms, 5 `drover.fail {"times":2}` that fail twice and then succeed,
//! 2 `drover.panic` with a budget of 2 that end in the dead letter, and one
//! keyed `drover.noop` enqueued twice (the second is refused with
//! `KeyExists`). Retries back off from 100 ms instead of the default 1 s,
//! and the worker polls every 100 ms, so the whole run takes seconds.
//!
//! A schedule fires during the demo: the built-in `drover.heartbeat` job,
//! declared every second ([`DEMO_HEARTBEAT_CRON`]) on the demo's lane. The
//! demo waits for at least one beat and reports the beats apart from the
//! mix (one item per tick, each keyed `periodic:drover.heartbeat:<tick>`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::queue::{Principal, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::{ConnectOptions, ListFilter};
use drover::worker::{POOL_SIZE_DEFAULT, WorkerSettings};
use drover::{InsertResult, Item, NewItem, Status};
use serde_json::json;

use crate::{CliError, Context, table};

/// The retry backoff base the demo uses (the default is 1 s).
pub const DEMO_RETRY_BASE: Duration = Duration::from_millis(100);
/// The claim poll the demo's worker uses (the default is 1 s), so retried
/// items are picked up as soon as their backoff ends.
pub const DEMO_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// The heartbeat schedule of the demo: every second, so it fires during
/// the run.
pub const DEMO_HEARTBEAT_CRON: &str = "* * * * * *";
/// The demo worker's capacity.
pub const DEMO_CAPACITY: usize = 20;

/// Arguments of `drover demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// How many `drover.noop` items to enqueue.
    #[arg(long, default_value = "200", value_name = "N")]
    pub noop: String,
    /// Give up (exit 1) if the items are not all final by then.
    #[arg(long, default_value = "2m", value_name = "DURATION")]
    pub timeout: String,
}

/// One kind's line of the summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct KindSummary {
    items: u64,
    done: u64,
    failed: u64,
    /// Handler runs (claims) spent on the kind's items.
    attempts: u64,
    /// Runs after an item's first.
    retries: u64,
}

/// Runs the demo and prints its summary.
///
/// # Errors
/// Invalid flags (exit 2); a database that cannot be opened, or a run that
/// does not finish within `--timeout` (exit 1).
///
/// # Cancel safety
/// Not cancel safe: dropping it abandons the demo's in-flight items (they
/// live in the demo database only).
pub async fn run(args: &DemoArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let noop = crate::parse::int("noop", &args.noop, 0u32, 1_000_000)?;
    let timeout = crate::parse::duration("timeout", &args.timeout)?;
    let url = cx.database_url().to_owned();
    if let Some(path) = sqlite_file(&url) {
        remove_database_file(path)?;
    }
    let queue = cx
        .queue_with(&ConnectOptions {
            pool_size: POOL_SIZE_DEFAULT,
            ..ConnectOptions::default()
        })
        .await?
        .with_config(QueueConfig {
            retry: RetryPolicy {
                base: DEMO_RETRY_BASE,
                ..RetryPolicy::default()
            },
            ..QueueConfig::default()
        });
    queue.migrate().await?;

    let lane = format!("demo-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let settings = WorkerSettings {
        lanes: vec![lane.clone()],
        capacity: DEMO_CAPACITY,
        poll_interval: DEMO_POLL_INTERVAL,
        pool_size: POOL_SIZE_DEFAULT,
        metrics_addr: None,
        heartbeat_cron: Some(DEMO_HEARTBEAT_CRON.to_owned()),
        // The demo drains its own lane only: its beats go there too.
        heartbeat_lane: lane.clone(),
        ..WorkerSettings::default()
    };
    // Registers the kinds (and their retry policy) on the queue before the
    // untyped enqueue below reads them.
    let worker = cx
        .worker_builder(queue.clone())
        .settings(settings)
        .build()?;

    writeln!(
        cx.out,
        "drover demo on {} (lane {lane}); retries back off from {} ms (default 1 s), \
         the worker polls every {} ms",
        crate::commands::migrate::backend_name(queue.backend()),
        DEMO_RETRY_BASE.as_millis(),
        DEMO_POLL_INTERVAL.as_millis(),
    )?;

    let items = mix(&lane, noop);
    let results = queue.enqueue_many(&Principal::system(), items).await?;
    let mut total = results
        .iter()
        .filter(|r| matches!(r, InsertResult::Inserted))
        .count() as u64;
    let key = format!("{lane}:once");
    let keyed = || {
        NewItem::new("drover.noop", json!({"note": "enqueued twice, runs once"}))
            .with_lane(lane.as_str())
            .with_key(key.as_str())
    };
    let first = queue.enqueue_item(&Principal::system(), keyed()).await?;
    if first.result == InsertResult::Inserted {
        total += 1;
    }
    let second = queue.enqueue_item(&Principal::system(), keyed()).await?;
    writeln!(
        cx.out,
        "enqueued {total} items; the keyed item enqueued again: {:?} (same id {})",
        second.result, second.item.id
    )?;

    let _quiet = QuietPlannedPanics::install();
    let started = Instant::now();
    let running = worker.start().await?;
    let bar = progress(total);
    let deadline = started + timeout;
    let finished = loop {
        let (final_count, failed, beats) = final_counts(&queue, &lane).await?;
        bar.set_position(final_count);
        bar.set_message(format!("{failed} dead-lettered, {beats} heartbeats"));
        if final_count >= total && beats >= 1 {
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    running.shutdown().await;
    if !finished {
        let (final_count, _, _) = final_counts(&queue, &lane).await?;
        return Err(CliError::Drover(drover::Error::Config(format!(
            "the demo did not finish within {}: {} of {total} items are not final",
            humantime::format_duration(timeout),
            total.saturating_sub(final_count)
        ))));
    }

    let items = queue
        .list(&ListFilter {
            lane: Some(lane.clone()),
            limit: u32::try_from(total)
                .unwrap_or(u32::MAX)
                .saturating_add(10_000),
            ..ListFilter::default()
        })
        .await?;
    let (beats, items): (Vec<Item>, Vec<Item>) = items
        .into_iter()
        .partition(|i| i.kind == drover::periodic::HEARTBEAT_NAME);
    write_summary(cx, &items, elapsed)?;
    write_beats(cx, &beats)?;
    Ok(())
}

/// The demo's items, in enqueue order (the keyed one is enqueued apart).
fn mix(lane: &str, noop: u32) -> Vec<NewItem> {
    let item = |kind: &str, payload| NewItem::new(kind, payload).with_lane(lane);
    let mut items = Vec::new();
    items.extend((0..noop).map(|i| item("drover.noop", json!({ "n": i }))));
    // Sleeps spread evenly from 50 to 200 ms.
    items.extend((0..20u64).map(|i| item("drover.sleep", json!({ "ms": 50 + i * 150 / 19 }))));
    items.extend((0..5).map(|_| item("drover.fail", json!({ "times": 2 }))));
    items.extend((0..2).map(|_| item("drover.panic", json!({})).with_max_attempts(2)));
    items
}

/// How many of the lane's mix items are final, how many of those failed,
/// and how many heartbeats are done.
async fn final_counts(queue: &drover::Queue, lane: &str) -> Result<(u64, u64, u64), CliError> {
    let mut fin = 0u64;
    let mut failed = 0u64;
    let mut beats = 0u64;
    for r in queue.counts().await? {
        if r.lane == lane && r.kind == drover::periodic::HEARTBEAT_NAME {
            if r.status == Status::Done {
                beats += u64::try_from(r.count).unwrap_or(0);
            }
        } else if r.lane == lane && r.status.is_final() {
            let n = u64::try_from(r.count).unwrap_or(0);
            fin += n;
            if r.status == Status::Failed {
                failed += n;
            }
        }
    }
    Ok((fin, failed, beats))
}

/// The schedule's line: how many ticks fired, each one item.
fn write_beats(cx: &mut Context<'_>, beats: &[Item]) -> Result<(), CliError> {
    let done = beats.iter().filter(|i| i.status == Status::Done).count();
    let mut keys: Vec<&str> = beats
        .iter()
        .filter_map(|i| i.idempotency_key.as_deref())
        .collect();
    keys.sort_unstable();
    writeln!(
        cx.out,
        "periodic: {} fired {} times during the demo (schedule {:?}), {done} done, one item per tick; last key {}",
        drover::periodic::HEARTBEAT_NAME,
        beats.len(),
        DEMO_HEARTBEAT_CRON,
        keys.last().copied().unwrap_or("-"),
    )?;
    Ok(())
}

fn progress(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let style = indicatif::ProgressStyle::with_template(
        "{bar:40} {pos}/{len} items final, {msg} ({elapsed})",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn summarize(items: &[Item]) -> BTreeMap<String, KindSummary> {
    let mut kinds: BTreeMap<String, KindSummary> = BTreeMap::new();
    for it in items {
        let k = kinds.entry(it.kind.clone()).or_default();
        let runs = u64::try_from(it.claim_seq).unwrap_or(0);
        k.items += 1;
        k.attempts += runs;
        k.retries += runs.saturating_sub(1);
        match it.status {
            Status::Done => k.done += 1,
            Status::Failed => k.failed += 1,
            _ => {}
        }
    }
    kinds
}

fn write_summary(cx: &mut Context<'_>, items: &[Item], elapsed: Duration) -> Result<(), CliError> {
    let kinds = summarize(items);
    let mut all = KindSummary::default();
    let mut rows = Vec::new();
    for (kind, k) in &kinds {
        all.items += k.items;
        all.done += k.done;
        all.failed += k.failed;
        all.attempts += k.attempts;
        all.retries += k.retries;
        rows.push(row(kind, k));
    }
    rows.push(row("(total)", &all));
    writeln!(cx.out)?;
    table::write(
        cx.out,
        &["KIND", "ITEMS", "DONE", "FAILED", "ATTEMPTS", "RETRIES"],
        &rows,
    )?;
    writeln!(
        cx.out,
        "(attempts: handler runs; retries: runs after an item's first)"
    )?;

    let dead: Vec<&Item> = items
        .iter()
        .filter(|i| i.status == Status::Failed)
        .collect();
    writeln!(cx.out)?;
    writeln!(cx.out, "dead letters: {}", dead.len())?;
    for d in &dead {
        writeln!(
            cx.out,
            "  {}  {}  attempts {}/{}  last error: {}",
            d.id,
            d.kind,
            d.attempts,
            d.max_attempts,
            d.last_error.as_deref().unwrap_or("-")
        )?;
    }
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        all.items as f64 / secs
    } else {
        0.0
    };
    writeln!(cx.out)?;
    writeln!(
        cx.out,
        "elapsed {secs:.2} s, {rate:.0} items/s ({} items, capacity {DEMO_CAPACITY})",
        all.items
    )?;
    Ok(())
}

fn row(kind: &str, k: &KindSummary) -> Vec<String> {
    vec![
        kind.to_owned(),
        k.items.to_string(),
        k.done.to_string(),
        k.failed.to_string(),
        k.attempts.to_string(),
        k.retries.to_string(),
    ]
}

/// The file an `sqlite:` URL names, if it names one (not `:memory:`).
fn sqlite_file(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or("");
    (!path.is_empty() && !path.contains(":memory:")).then_some(path)
}

/// Deletes the demo database file and its journal files, if present.
fn remove_database_file(path: &str) -> Result<(), CliError> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = format!("{path}{suffix}");
        match std::fs::remove_file(&p) {
            Ok(()) => tracing::debug!(path = %p, "removed the previous demo database"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CliError::io(
                    format!("removing the previous demo database {p}"),
                    e,
                ));
            }
        }
    }
    Ok(())
}

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static>;

/// While alive, the panic hook stays silent for `drover.panic`'s planned
/// panics (the worker turns them into failed attempts; the summary shows
/// them); every other panic is reported as before.
struct QuietPlannedPanics {
    previous: Arc<PanicHook>,
}

impl QuietPlannedPanics {
    fn install() -> Self {
        let previous: Arc<PanicHook> = Arc::new(std::panic::take_hook());
        let inner = previous.clone();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !msg.starts_with("drover.panic") {
                inner(info);
            }
        }));
        QuietPlannedPanics { previous }
    }
}

impl Drop for QuietPlannedPanics {
    fn drop(&mut self) {
        let previous = self.previous.clone();
        std::panic::set_hook(Box::new(move |info| previous(info)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_file_names_the_path() {
        assert_eq!(
            sqlite_file("sqlite://drover-demo.db"),
            Some("drover-demo.db")
        );
        assert_eq!(sqlite_file("sqlite:x.db?mode=rwc"), Some("x.db"));
        assert_eq!(sqlite_file("sqlite:///tmp/a.db"), Some("/tmp/a.db"));
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("memory:"), None);
        assert_eq!(sqlite_file("postgres://h/db"), None);
    }

    #[test]
    fn the_mix_has_every_kind() {
        let items = mix("demo-x", 200);
        assert_eq!(items.len(), 227);
        let sleeps: Vec<u64> = items
            .iter()
            .filter(|i| i.kind == "drover.sleep")
            .filter_map(|i| i.payload["ms"].as_u64())
            .collect();
        assert_eq!(sleeps.first(), Some(&50));
        assert_eq!(sleeps.last(), Some(&200));
    }
}
