//! The scheduler driven directly with injected clocks: many schedulers over
//! one database produce one item per tick whatever the interleaving and
//! skew; each misfire policy after an outage; DST; refused declarations;
//! removed schedules.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Timelike, Utc};
use drover::periodic::{MisfirePolicy, Schedule, Scheduler, SchedulerConfig};
use drover::queue::{JobContext, Kind};
use drover::store::memory::MemoryStore;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{Clock, ListFilter, Store};
use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
use drover::{ErrorKind, Queue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

#[derive(serde::Serialize, serde::Deserialize)]
struct Tick {}
impl Kind for Tick {
    const NAME: &'static str = "tick";
}

struct TickHandler;
impl Handler for TickHandler {
    type Job = Tick;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test",
        retry: "test",
        recovery: "test",
        checkpoint: "none: one short call, a rerun starts over",
    };
    async fn handle(&self, _cx: &JobContext, _job: Tick) -> Outcome {
        Ok(Done::Completed)
    }
}

/// A clock the test sets, shared by every scheduler's store.
#[derive(Debug)]
struct SetClock(Mutex<DateTime<Utc>>);
impl SetClock {
    fn at(t: DateTime<Utc>) -> Arc<Self> {
        Arc::new(SetClock(Mutex::new(t)))
    }
    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap() = t;
    }
    fn advance(&self, d: chrono::Duration) {
        *self.0.lock().unwrap() += d;
    }
}
impl Clock for SetClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// One worker's clock: the shared time plus its own skew.
#[derive(Debug)]
struct Skewed {
    base: Arc<SetClock>,
    skew: chrono::Duration,
}
impl Clock for Skewed {
    fn now(&self) -> DateTime<Utc> {
        self.base.now() + self.skew
    }
}

fn scheduler(store: Arc<dyn Store>, schedules: Vec<Schedule>) -> Scheduler {
    Scheduler::new(Queue::new(store), schedules, SchedulerConfig::default()).expect("scheduler")
}

/// Every item of the nil tenant, keyed by tick (parsed from the key).
async fn ticks_of(store: &dyn Store, name: &str) -> BTreeMap<DateTime<Utc>, usize> {
    let items = store
        .item_list(&ListFilter {
            tenant_id: Some(Uuid::nil()),
            limit: 100_000,
            ..ListFilter::default()
        })
        .await
        .expect("list");
    let prefix = format!("periodic:{name}:");
    let mut out = BTreeMap::new();
    for i in items {
        let key = i.idempotency_key.expect("a periodic item has a key");
        let Some(tick) = key.strip_prefix(&prefix) else {
            continue;
        };
        let t = DateTime::parse_from_rfc3339(tick)
            .expect("an RFC 3339 tick")
            .with_timezone(&Utc);
        assert!(tick.ends_with('Z'), "UTC: {key}");
        *out.entry(t).or_insert(0) += 1;
    }
    out
}

fn minutely() -> Schedule {
    Schedule::new("every-minute", "* * * * *", Tick {})
}

/// Five schedulers, each over its own SQLite handle on one file (as five
/// worker processes are) with its own clock `skew`, run in random subsets,
/// concurrently, for 1,000 simulated minutes: exactly one item per tick.
async fn five_schedulers_1000_minutes(skews: [i64; 5], seed: u64) {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("p.db").display());
    // Half past a minute, so the first tick is a whole minute away.
    let start = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 30).unwrap();
    let base = SetClock::at(start);
    let mut schedulers = Vec::new();
    let mut first: Option<Arc<dyn Store>> = None;
    for skew in skews {
        let store = SqliteStore::open(
            &url,
            SqliteOptions {
                clock: Arc::new(Skewed {
                    base: base.clone(),
                    skew: chrono::Duration::seconds(skew),
                }),
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("open");
        store.migrate().await.expect("migrate");
        let store: Arc<dyn Store> = Arc::new(store);
        first.get_or_insert_with(|| store.clone());
        schedulers.push(Arc::new(scheduler(store, vec![minutely()])));
    }
    // The unskewed scheduler declares the schedule at the start.
    let zero = skews
        .iter()
        .position(|s| *s == 0)
        .expect("one unskewed clock");
    schedulers[zero].run_once().await.expect("declare");
    let max_skew = skews.iter().copied().max().unwrap_or(0);
    // Stop while even the fastest clock is short of the 1,001st tick …
    let end = start + chrono::Duration::minutes(1000) - chrono::Duration::seconds(max_skew + 1);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut runs = 0u64;
    while base.now() < end {
        base.advance(chrono::Duration::seconds(rng.random_range(5..=25)));
        let mut chosen: Vec<Arc<Scheduler>> = schedulers
            .iter()
            .filter(|_| rng.random_bool(0.5))
            .cloned()
            .collect();
        if chosen.is_empty() {
            chosen.push(schedulers[rng.random_range(0..schedulers.len())].clone());
        }
        runs += chosen.len() as u64;
        let reports = futures::future::join_all(chosen.iter().map(|s| s.run_once())).await;
        for r in reports {
            let r = r.expect("run");
            assert!(r.errors.is_empty(), "{:?}", r.errors);
        }
    }
    // … then the unskewed one catches the 1,000th.
    base.set(start + chrono::Duration::minutes(1000) - chrono::Duration::seconds(1));
    schedulers[zero].run_once().await.expect("last run");
    let store = first.expect("a store");
    let ticks = ticks_of(store.as_ref(), "every-minute").await;
    let doubled: Vec<_> = ticks.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        doubled.is_empty(),
        "ticks with more than one item: {doubled:?}"
    );
    assert_eq!(ticks.len(), 1000, "one item per tick over {runs} runs");
    let expected: Vec<DateTime<Utc>> = (1..=1000)
        .map(|m| Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap() + chrono::Duration::minutes(m))
        .collect();
    assert_eq!(
        ticks.keys().copied().collect::<Vec<_>>(),
        expected,
        "every tick, none missing"
    );
    eprintln!(
        "skews {skews:?} s: {} items for 1000 ticks over {runs} scheduler runs",
        ticks.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_schedulers_over_1000_minutes_enqueue_one_item_per_tick() {
    five_schedulers_1000_minutes([0, 0, 0, 0, 0], 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_schedulers_with_clocks_skewed_30s_enqueue_one_item_per_tick() {
    five_schedulers_1000_minutes([-30, -15, 0, 15, 30], 2).await;
}

/// Runs a scheduler at `start`, then at the first tick, then after a 3-hour
/// outage with a fresh scheduler (a restarted fleet); returns the ticks.
async fn after_outage(
    policy: MisfirePolicy,
) -> (
    BTreeMap<DateTime<Utc>, usize>,
    drover::periodic::SchedulerReport,
) {
    let m = Utc.with_ymd_and_hms(2026, 2, 1, 8, 0, 0).unwrap();
    let clock = SetClock::at(m + chrono::Duration::seconds(10));
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let decl = || minutely().misfire(policy);
    let before = scheduler(store.clone(), vec![decl()]);
    before.run_once().await.expect("declare");
    clock.advance(chrono::Duration::minutes(1));
    let r = before.run_once().await.expect("first tick");
    assert_eq!(r.enqueued, 1);
    drop(before);
    // Every worker down for three hours; then a new one starts.
    clock.advance(chrono::Duration::hours(3));
    let after = scheduler(store.clone(), vec![decl()]);
    let report = after.run_once().await.expect("after the outage");
    // Restarting again repeats nothing.
    let again = scheduler(store.clone(), vec![decl()])
        .run_once()
        .await
        .expect("again");
    assert_eq!(
        (again.enqueued, again.existing),
        (0, 0),
        "a restart repeats no tick"
    );
    // And the next tick runs as usual.
    clock.advance(chrono::Duration::minutes(1));
    let next = after.run_once().await.expect("next tick");
    assert_eq!(next.enqueued, 1, "the schedule goes on");
    (ticks_of(store.as_ref(), "every-minute").await, report)
}

fn at(m: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 1, 8, 0, 0).unwrap() + chrono::Duration::minutes(m)
}

#[tokio::test]
async fn misfire_skip_after_a_3_hour_outage_runs_only_the_current_tick() {
    let (ticks, report) = after_outage(MisfirePolicy::Skip).await;
    // 08:01 before; 11:01 (10 s late, within the grace) after; then 11:02.
    assert_eq!(
        ticks.keys().copied().collect::<Vec<_>>(),
        vec![at(1), at(181), at(182)]
    );
    assert_eq!((report.missed, report.dropped), (179, 179));
}

#[tokio::test]
async fn misfire_once_after_a_3_hour_outage_runs_one_catch_up() {
    let (ticks, report) = after_outage(MisfirePolicy::Once).await;
    // One catch-up for 08:02 … 11:00, keyed by the latest of them.
    assert_eq!(
        ticks.keys().copied().collect::<Vec<_>>(),
        vec![at(1), at(180), at(181), at(182)]
    );
    assert_eq!((report.missed, report.dropped), (179, 178));
}

#[tokio::test]
async fn misfire_all_after_a_3_hour_outage_runs_every_tick() {
    let (ticks, report) = after_outage(MisfirePolicy::All { max_backfill: 1000 }).await;
    assert_eq!(
        ticks.keys().copied().collect::<Vec<_>>(),
        (1..=182).map(at).collect::<Vec<_>>()
    );
    assert!(ticks.values().all(|n| *n == 1));
    assert_eq!(
        (report.missed, report.dropped, report.enqueued),
        (179, 0, 180)
    );
}

#[tokio::test]
async fn misfire_all_is_capped_by_max_backfill() {
    let (ticks, report) = after_outage(MisfirePolicy::All { max_backfill: 50 }).await;
    // The 50 latest missed ticks (10:11 … 11:00), then 11:01 and 11:02.
    let mut want = vec![at(1)];
    want.extend((131..=182).map(at));
    assert_eq!(ticks.keys().copied().collect::<Vec<_>>(), want);
    assert_eq!(
        (report.missed, report.dropped, report.enqueued),
        (179, 129, 51)
    );
}

/// Runs a scheduler every 7 simulated minutes from `from` to `to`; returns
/// the ticks enqueued.
async fn drive(schedule: Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let clock = SetClock::at(from);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let name = schedule.name().to_owned();
    let s = scheduler(store.clone(), vec![schedule]);
    while clock.now() < to {
        s.run_once().await.expect("run");
        clock.advance(chrono::Duration::minutes(7));
    }
    let ticks = ticks_of(store.as_ref(), &name).await;
    assert!(ticks.values().all(|n| *n == 1), "{ticks:?}");
    ticks.into_keys().collect()
}

#[tokio::test]
async fn berlin_0230_fires_once_on_the_spring_forward_day_after_the_gap() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    let s = Schedule::new("berlin", "30 2 * * *", Tick {}).zone("Europe/Berlin");
    let ticks = drive(
        s,
        Utc.with_ymd_and_hms(2026, 3, 27, 12, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 3, 31, 12, 0, 0).unwrap(),
    )
    .await;
    let berlin = chrono_tz::Europe::Berlin;
    let local: Vec<String> = ticks
        .iter()
        .map(|t| {
            t.with_timezone(&berlin)
                .format("%m-%d %H:%M %Z")
                .to_string()
        })
        .collect();
    assert_eq!(
        local,
        vec![
            "03-28 02:30 CET",
            "03-29 03:00 CEST",
            "03-30 02:30 CEST",
            "03-31 02:30 CEST"
        ],
        "once a day; on the gap day at the first valid instant after the gap"
    );
}

#[tokio::test]
async fn berlin_0230_fires_once_on_the_fall_back_day() {
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    let s = Schedule::new("berlin", "30 2 * * *", Tick {}).zone("Europe/Berlin");
    let ticks = drive(
        s,
        Utc.with_ymd_and_hms(2026, 10, 23, 12, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 10, 27, 12, 0, 0).unwrap(),
    )
    .await;
    let berlin = chrono_tz::Europe::Berlin;
    let local: Vec<String> = ticks
        .iter()
        .map(|t| {
            t.with_timezone(&berlin)
                .format("%m-%d %H:%M %Z")
                .to_string()
        })
        .collect();
    assert_eq!(
        local,
        vec![
            "10-24 02:30 CEST",
            "10-25 02:30 CEST",
            "10-26 02:30 CET",
            "10-27 02:30 CET"
        ],
        "once a day; on the fall-back day at the first of the two 02:30s"
    );
}

#[tokio::test]
async fn new_york_midnight_fires_at_local_midnight_across_both_transitions() {
    let ny = chrono_tz::America::New_York;
    for (from, to, days) in [
        // 2026-03-08: spring forward (EST → EDT).
        ((2026, 3, 5), (2026, 3, 11), 6),
        // 2026-11-01: fall back (EDT → EST).
        ((2026, 10, 29), (2026, 11, 4), 6),
    ] {
        let s = Schedule::new("ny", "0 0 * * *", Tick {}).zone("America/New_York");
        let ticks = drive(
            s,
            Utc.with_ymd_and_hms(from.0, from.1, from.2, 12, 0, 0)
                .unwrap(),
            Utc.with_ymd_and_hms(to.0, to.1, to.2, 12, 0, 0).unwrap(),
        )
        .await;
        assert_eq!(ticks.len(), days, "one a day: {ticks:?}");
        for t in &ticks {
            let l = t.with_timezone(&ny);
            assert_eq!((l.hour(), l.minute()), (0, 0), "local midnight: {l}");
        }
        let offsets: std::collections::BTreeSet<i64> =
            ticks.iter().map(|t| i64::from(t.hour())).collect();
        assert_eq!(
            offsets.len(),
            2,
            "both sides of the transition (04:00 and 05:00 UTC): {ticks:?}"
        );
    }
}

fn refused(schedule: Schedule) -> drover::Error {
    Worker::builder(Queue::memory())
        .handler(TickHandler)
        .schedule(schedule)
        .build()
        .expect_err("refused")
}

#[test]
fn an_invalid_cron_is_refused_naming_the_schedule_and_field() {
    let e = refused(Schedule::new("broken", "61 * * * *", Tick {}));
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let drover::Error::InvalidInput { field, reason } = &e else {
        panic!("{e}")
    };
    assert_eq!(*field, "cron");
    assert!(reason.contains("\"broken\""), "{reason}");
    let e = refused(Schedule::new("broken", "* * *", Tick {}));
    assert!(
        matches!(e, drover::Error::InvalidInput { field: "cron", .. }),
        "{e}"
    );
}

#[test]
fn an_unknown_zone_is_refused_naming_the_schedule_and_field() {
    let e = refused(Schedule::new("zoned", "0 3 * * *", Tick {}).zone("Mars/Olympus_Mons"));
    let drover::Error::InvalidInput { field, reason } = &e else {
        panic!("{e}")
    };
    assert_eq!(*field, "zone");
    assert!(
        reason.contains("\"zoned\"") && reason.contains("Mars/Olympus_Mons"),
        "{reason}"
    );
}

#[test]
fn a_bad_name_or_a_name_used_twice_is_refused() {
    let e = refused(Schedule::new("has:colon", "* * * * *", Tick {}));
    assert!(
        matches!(e, drover::Error::InvalidInput { field: "name", .. }),
        "{e}"
    );
    let e = Worker::builder(Queue::memory())
        .handler(TickHandler)
        .schedule(minutely())
        .schedule(minutely())
        .build()
        .expect_err("refused");
    assert!(
        matches!(e, drover::Error::InvalidInput { field: "name", .. }),
        "{e}"
    );
}

#[test]
fn seconds_field_is_optional() {
    let s = Schedule::new("s", "*/10 * * * * *", Tick {})
        .compile()
        .expect("six fields");
    let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 1).unwrap();
    let next = s.next_ticks(t, 3);
    assert_eq!(next[0], Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 10).unwrap());
    assert_eq!(next.len(), 3);
}

#[tokio::test]
async fn a_schedule_removed_from_code_stops_is_listed_inactive_then_purged() {
    let clock = SetClock::at(Utc.with_ymd_and_hms(2026, 4, 1, 0, 0, 30).unwrap());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let gone = || Schedule::new("gone", "* * * * *", Tick {});
    let old = scheduler(store.clone(), vec![minutely(), gone()]);
    old.run_once().await.expect("declare");
    clock.advance(chrono::Duration::minutes(1));
    assert_eq!(old.run_once().await.expect("run").enqueued, 2);
    drop(old);
    // The next release no longer declares "gone".
    let new = scheduler(store.clone(), vec![minutely()]);
    for _ in 0..20 {
        clock.advance(chrono::Duration::minutes(1));
        new.run_once().await.expect("run");
    }
    assert_eq!(
        ticks_of(store.as_ref(), "gone").await.len(),
        1,
        "no tick after removal"
    );
    let config = SchedulerConfig::default();
    let now = store.db_now().await.expect("now");
    let rows = store.schedule_list().await.expect("list");
    let gone_row = rows
        .iter()
        .find(|r| r.decl.name == "gone")
        .expect("the row is kept");
    assert!(
        !gone_row.is_active(now, config.inactive_after),
        "listed inactive"
    );
    let live = rows
        .iter()
        .find(|r| r.decl.name == "every-minute")
        .expect("row");
    assert!(live.is_active(now, config.inactive_after));
    // Past the retention it is purged; the live one stays.
    clock.advance(chrono::Duration::days(31));
    let r = new.run_once().await.expect("run");
    assert_eq!(r.purged, 1);
    let names: Vec<String> = store
        .schedule_list()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.decl.name)
        .collect();
    assert_eq!(names, vec!["every-minute".to_owned()]);
}

#[tokio::test]
async fn trigger_enqueues_a_manual_item_outside_the_ticks() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let s = scheduler(store.clone(), vec![minutely()]);
    let a = s.trigger("every-minute").await.expect("trigger");
    let b = s.trigger("every-minute").await.expect("trigger");
    for i in [&a, &b] {
        let key = i.item.idempotency_key.as_deref().expect("key");
        assert!(key.starts_with("periodic:every-minute:manual:"), "{key}");
    }
    assert_ne!(a.item.id, b.item.id, "each trigger is its own item");
    assert_eq!(
        s.trigger("nope").await.expect_err("unknown").kind(),
        ErrorKind::NotFound
    );
    assert!(
        store.schedule_list().await.expect("list").is_empty(),
        "the row is untouched"
    );
}

#[tokio::test]
async fn jitter_delays_availability_by_the_same_offset_on_every_worker() {
    let s = Schedule::new("j", "* * * * *", Tick {})
        .jitter(Duration::from_secs(30))
        .compile()
        .expect("compile");
    let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 0).unwrap();
    let a = s.item_for(t).available_at.expect("set");
    let b = s.item_for(t).available_at.expect("set");
    assert_eq!(a, b, "deterministic");
    assert!(a >= t && a < t + chrono::Duration::seconds(30), "{a}");
}

#[test]
fn a_max_backfill_above_the_limit_is_refused() {
    let limit = drover::periodic::MAX_BACKFILL_LIMIT;
    let e = refused(minutely().misfire(MisfirePolicy::All {
        max_backfill: limit + 1,
    }));
    let drover::Error::InvalidInput { field, reason } = &e else {
        panic!("{e}")
    };
    assert_eq!(*field, "misfire");
    assert!(
        reason.contains(&limit.to_string()),
        "names the limit: {reason}"
    );
    assert!(reason.contains("\"every-minute\""), "{reason}");
    minutely()
        .misfire(MisfirePolicy::All {
            max_backfill: limit,
        })
        .compile()
        .expect("the limit itself is accepted");
}

/// The value of `drover_enqueued_total{lane, kind}` in a rendering.
fn enqueued_total(rendered: &str, lane: &str, kind: &str) -> f64 {
    rendered
        .lines()
        .filter(|l| l.starts_with("drover_enqueued_total{"))
        .filter(|l| {
            l.contains(&format!("lane=\"{lane}\"")) && l.contains(&format!("kind=\"{kind}\""))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// Ticks and backfilled ticks count in `drover_enqueued_total` under the
/// same lane and kind labels a direct enqueue of the kind uses.
#[tokio::test]
async fn scheduler_ticks_and_backfill_count_as_enqueued_like_a_direct_enqueue() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // This thread's recorder: the test runs on one thread, and no other
    // test's counts reach it.
    let _local = metrics::set_default_local_recorder(&recorder);
    let clock = SetClock::at(at(0) + chrono::Duration::seconds(10));
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let s = scheduler(
        store.clone(),
        vec![minutely().misfire(MisfirePolicy::All { max_backfill: 50 })],
    );
    s.run_once().await.expect("declare");
    clock.advance(chrono::Duration::minutes(1));
    assert_eq!(s.run_once().await.expect("a tick").enqueued, 1);
    clock.advance(chrono::Duration::hours(3));
    let r = s.run_once().await.expect("after an outage");
    assert_eq!(r.enqueued, 51, "50 backfilled and the current tick");
    assert_eq!(enqueued_total(&handle.render(), "default", "tick"), 52.0);
    Queue::new(store)
        .enqueue(Tick {})
        .await
        .expect("a direct enqueue");
    assert_eq!(
        enqueued_total(&handle.render(), "default", "tick"),
        53.0,
        "one series for both"
    );
}

/// Two workers draining different first lanes declare the heartbeat with
/// one lane (the `heartbeat_lane` setting), so neither rewrites the row the
/// other declared.
#[tokio::test]
async fn workers_with_different_first_lanes_declare_one_heartbeat_row() {
    let q = Queue::memory();
    let worker = |lane: &str| {
        Worker::builder(q.clone())
            .settings(drover::worker::WorkerSettings {
                lanes: vec![lane.to_owned(), "default".to_owned()],
                metrics_addr: None,
                ..Default::default()
            })
            .handler(TickHandler)
            .build()
            .expect("build")
    };
    let (mail, reports) = (worker("mail"), worker("reports"));
    let run = |w: &Worker| w.scheduler().expect("the heartbeat's").clone();
    let first = run(&mail).run_once().await.expect("mail's run");
    assert_eq!(first.declared, 1, "the first declares the row");
    for w in [&reports, &mail, &reports] {
        let r = run(w).run_once().await.expect("run");
        assert_eq!(r.declared, 0, "the row is not rewritten: {r:?}");
    }
    let rows = q.store().schedule_list().await.expect("rows");
    let beat = rows
        .iter()
        .find(|r| r.decl.name == drover::periodic::HEARTBEAT_NAME)
        .expect("the heartbeat's row");
    assert_eq!(beat.decl.lane, "default");
}
