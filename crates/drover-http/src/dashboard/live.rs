//! The shared live view: one query set per interval, whoever is watching.
//!
//! One refresher reads counts, gauges, workers, lane states, the items
//! running now, the sweep's last pass and the oldest open transaction every
//! interval, and the per-minute history (the store's rollup, migration
//! 0041) at most every [`HISTORY_EVERY`]; it keeps the newest snapshot for
//! page views (a page view never queries these itself) and broadcasts the
//! rendered overview to every open tab over server-sent events. Ten tabs
//! cost the database what one does. The history is the database's, so a
//! restart of the server blanks no chart. A tenant-scoped overview's counts
//! are read on demand, at most once per interval and tenant, and so are the
//! dead letter's newest items its groups are made from, per filter, and
//! each tenant's fair share of each lane (the lanes page's and `GET
//! /v1/fairness`'s). A refresh forgets those per-interval reads, so a
//! caller that refreshes reads them anew.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use drover::Queue;
use drover::store::fairness::FairShare;
use drover::store::throughput::{
    RunningRow, ThroughputBy, ThroughputQuery, ThroughputRow, WaitRow,
};
use drover::store::{CountRow, Gauges, ListFilter, WorkerRow};
use drover::{Item, Status};
use tokio::sync::{RwLock, broadcast};
use uuid::Uuid;

/// How often the live view is refreshed when none is configured.
pub const LIVE_INTERVAL_DEFAULT: Duration = Duration::from_secs(2);
/// How far back the history reaches: the day chart.
pub const HISTORY_SPAN: chrono::TimeDelta = chrono::TimeDelta::hours(24);
/// How often the history is read again (the sweep settles it every pass,
/// 15 s by default, so reading it every refresh would read the same rows).
pub const HISTORY_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(10);

/// The per-minute history as the overview shows it.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// When it was read.
    pub at: Option<DateTime<Utc>>,
    /// Per minute over the last day, every lane and kind summed.
    pub minutes: Vec<ThroughputRow>,
    /// Per lane and kind over the last hour.
    pub groups_hour: Vec<ThroughputRow>,
    /// The queue wait per minute and lane over the last day
    /// (installation-wide: shown to unscoped sessions only).
    pub waits: Vec<WaitRow>,
}

/// What one refresh read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When it was read.
    pub at: DateTime<Utc>,
    /// Items per lane, kind and status.
    pub counts: Vec<CountRow>,
    /// Oldest waiting age per lane and the dead-letter size.
    pub gauges: Gauges,
    /// Worker rows.
    pub workers: Vec<WorkerRow>,
    /// The paused lanes.
    pub paused: Vec<String>,
    /// The items claimed now.
    pub running: Vec<RunningRow>,
    /// When the last completed sweep pass ended.
    pub sweep_last: Option<DateTime<Utc>>,
    /// The age of the oldest open transaction (PostgreSQL; `None` on the
    /// engines that have none to watch).
    pub oldest_xact: Option<Duration>,
    /// The per-minute history.
    pub history: Arc<History>,
    /// The error of the last refresh, when it failed (the data is older).
    pub error: Option<String>,
}

impl Snapshot {
    /// Totals per lane: pending, claimed, done, failed, cancelled.
    pub fn per_lane(&self) -> BTreeMap<String, [i64; 5]> {
        let mut out: BTreeMap<String, [i64; 5]> = BTreeMap::new();
        for r in &self.counts {
            let slot = match r.status {
                Status::Pending => 0,
                Status::Claimed => 1,
                Status::Done => 2,
                Status::Failed => 3,
                Status::Cancelled => 4,
            };
            out.entry(r.lane.clone()).or_default()[slot] += r.count;
        }
        out
    }
}

/// The shared live view. See the module docs.
pub struct Live {
    queue: Queue,
    interval: Duration,
    latest: RwLock<Option<Arc<Snapshot>>>,
    history: Mutex<Arc<History>>,
    tx: broadcast::Sender<Arc<Snapshot>>,
    started: AtomicBool,
    refreshes: AtomicU64,
    /// Each tenant-scoped overview's counts, read at most once per
    /// interval per tenant however many of its viewers load the page (the
    /// read counts the tenant's pending and claimed rows: 100 ms at
    /// 10,000,000 items). Only entries younger than the interval stay.
    tenants: PerKey<Uuid, Vec<CountRow>>,
    /// Per tenant, its per-minute history of the last day and when it was
    /// read: a tenant's overview charts its own items, read at most every
    /// [`HISTORY_EVERY`] per tenant and shared by its viewers meanwhile.
    tenant_history: PerKey<Uuid, Vec<ThroughputRow>>,
    /// The dead letter's newest items per filter (the page's groups are
    /// made from them), read at most once per interval per filter however
    /// many viewers load the page: the read is a thousand full rows (15 ms
    /// at 10,000,000 items, most of a dead-letter page view). A dashboard
    /// action that changes items forgets them ([`Live::dead_scan_stale`]).
    dead: PerKey<String, Vec<Item>>,
    /// Each tenant's fair share of each lane, read at most once per
    /// interval however many viewers load the lanes page or call `GET
    /// /v1/fairness`: the read counts up to
    /// [`FAIR_WAITING_CAP`](drover::store::fairness::FAIR_WAITING_CAP) due
    /// items per lane and tenant (6.8 ms at 10,000,000 items, most of
    /// either view). A change of weights or lanes through the server
    /// forgets it ([`Live::fair_shares_stale`]).
    fair: PerKey<(), Vec<FairShare>>,
}

/// Values read on demand and shared per key for a while: one read per key
/// and period however many callers ask; the callers arriving meanwhile
/// wait for it and share it. Only entries younger than the period stay.
struct PerKey<K, V> {
    entries: tokio::sync::Mutex<HashMap<K, (Instant, Arc<V>)>>,
}

impl<K: Eq + std::hash::Hash, V> PerKey<K, V> {
    fn new() -> Self {
        PerKey {
            entries: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// `key`'s value if read less than `period` ago, else `read`'s (nothing
    /// is kept when it fails).
    async fn get<F>(&self, key: K, period: Duration, read: F) -> drover::Result<Arc<V>>
    where
        F: std::future::Future<Output = drover::Result<V>>,
    {
        let mut entries = self.entries.lock().await;
        if let Some((at, v)) = entries.get(&key)
            && at.elapsed() < period
        {
            return Ok(v.clone());
        }
        let v = Arc::new(read.await?);
        entries.retain(|_, (at, _)| at.elapsed() < period);
        entries.insert(key, (Instant::now(), v.clone()));
        Ok(v)
    }

    /// Forgets every value: the next call of each key reads.
    async fn clear(&self) {
        self.entries.lock().await.clear();
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("interval", &self.interval)
            .field("refreshes", &self.refreshes())
            .finish_non_exhaustive()
    }
}

impl Live {
    /// A live view of `queue`, refreshed every `interval` once started.
    pub fn new(queue: Queue, interval: Duration) -> Arc<Self> {
        let (tx, _) = broadcast::channel(8);
        Arc::new(Live {
            queue,
            interval,
            latest: RwLock::new(None),
            history: Mutex::new(Arc::new(History::default())),
            tx,
            started: AtomicBool::new(false),
            refreshes: AtomicU64::new(0),
            tenants: PerKey::new(),
            tenant_history: PerKey::new(),
            dead: PerKey::new(),
            fair: PerKey::new(),
        })
    }

    /// The items `scan` lists (the dead letter's newest, for its groups),
    /// at most one interval old: one read per interval and filter, which
    /// the viewers arriving meanwhile wait for and share.
    ///
    /// # Errors
    /// Storage errors of the read (nothing is cached then).
    pub async fn dead_scan(&self, scan: &ListFilter) -> drover::Result<Arc<Vec<Item>>> {
        self.dead
            .get(format!("{scan:?}"), self.interval, self.queue.list(scan))
            .await
    }

    /// Forgets the dead-letter scans, so the next page view reads again
    /// (after an action that retried or cancelled items).
    pub async fn dead_scan_stale(&self) {
        self.dead.clear().await;
    }

    /// Each tenant's fair share of each lane, at most one interval old:
    /// one read per interval, which the viewers arriving meanwhile wait
    /// for and share.
    ///
    /// # Errors
    /// Storage errors of the read (nothing is cached then).
    pub async fn fair_shares(&self) -> drover::Result<Arc<Vec<FairShare>>> {
        self.fair
            .get((), self.interval, self.queue.fair_shares())
            .await
    }

    /// Forgets the fair shares, so the next view reads them (after a
    /// change of a weight or of a lane's fairness).
    pub async fn fair_shares_stale(&self) {
        self.fair.clear().await;
    }

    /// Items per lane, kind and status of one tenant (a tenant-scoped
    /// overview's counts), at most one interval old: one read per interval
    /// and tenant, which the viewers arriving meanwhile wait for and share.
    ///
    /// # Errors
    /// Storage errors of the read (nothing is cached then).
    pub async fn counts_tenant(&self, tenant: Uuid) -> drover::Result<Arc<Vec<CountRow>>> {
        self.tenants
            .get(tenant, self.interval, self.queue.counts_tenant(tenant))
            .await
    }

    /// One tenant's items done and failed per minute over the last day
    /// (its overview's charts), at most [`HISTORY_EVERY`] old: one read of
    /// the rollup's last day per tenant and interval, shared by the
    /// tenant's viewers meanwhile.
    ///
    /// # Errors
    /// Storage errors of the read (nothing is cached then).
    pub async fn history_tenant(&self, tenant: Uuid) -> drover::Result<Arc<Vec<ThroughputRow>>> {
        let every = HISTORY_EVERY.to_std().unwrap_or(Duration::from_secs(10));
        let query = ThroughputQuery {
            since: Utc::now() - HISTORY_SPAN,
            tenant_id: Some(tenant),
            by: ThroughputBy::Minute,
        };
        self.tenant_history
            .get(tenant, every, async { self.queue.throughput(&query).await })
            .await
    }

    /// How many query sets have run: one per interval, however many tabs
    /// watch.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Runs one query set and publishes it. A failed read keeps the last
    /// data, marked with the error.
    pub async fn refresh(&self) -> Arc<Snapshot> {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        self.forget_on_demand().await;
        let read = async {
            let counts = self.queue.counts().await?;
            let gauges = self.queue.gauges().await?;
            let workers = self.queue.workers().await?;
            let paused = self.queue.lanes_paused().await?;
            let running = self.queue.items_running().await?;
            let sweep_last = self.queue.sweep_last_pass().await?;
            let oldest_xact = self.queue.db_oldest_xact_age().await?;
            let history = self.history_now().await?;
            drover::Result::Ok(Snapshot {
                at: Utc::now(),
                counts,
                gauges,
                workers,
                paused,
                running,
                sweep_last,
                oldest_xact,
                history,
                error: None,
            })
        };
        let snap = match read.await {
            Ok(s) => s,
            Err(e) => {
                let e: drover::Error = e;
                tracing::warn!(error = %e, "dashboard refresh failed; showing the last data");
                let last = self.latest.read().await.clone();
                let mut s = last.map_or_else(
                    || Snapshot {
                        at: Utc::now(),
                        counts: vec![],
                        gauges: Gauges::default(),
                        workers: vec![],
                        paused: vec![],
                        running: vec![],
                        sweep_last: None,
                        oldest_xact: None,
                        history: Arc::default(),
                        error: None,
                    },
                    |s| (*s).clone(),
                );
                s.error = Some(e.to_string());
                s
            }
        };
        let snap = Arc::new(snap);
        *self.latest.write().await = Some(snap.clone());
        // No subscriber is normal: nobody has the overview open.
        let _ = self.tx.send(snap.clone());
        snap
    }

    /// Forgets the reads kept for an interval (a tenant's counts, the
    /// dead-letter scans, the fair shares): after a refresh every view
    /// reads data at least as new as the snapshot. A tenant's history
    /// keeps its own period, as the installation's does.
    async fn forget_on_demand(&self) {
        self.tenants.clear().await;
        self.dead.clear().await;
        self.fair.clear().await;
    }

    /// Starts the refresher once (it ends when the last handle on the view
    /// is dropped).
    pub fn start(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<Live> = Arc::downgrade(self);
        let interval = self.interval;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(live) = weak.upgrade() else { break };
                live.refresh().await;
            }
        });
    }

    /// The newest snapshot, reading one first if none was read yet.
    pub async fn latest(self: &Arc<Self>) -> Arc<Snapshot> {
        self.start();
        if let Some(s) = self.latest.read().await.clone() {
            return s;
        }
        self.refresh().await
    }

    /// Every snapshot from now on.
    pub fn subscribe(self: &Arc<Self>) -> broadcast::Receiver<Arc<Snapshot>> {
        self.start();
        self.tx.subscribe()
    }

    /// The history, read again when older than [`HISTORY_EVERY`].
    async fn history_now(&self) -> drover::Result<Arc<History>> {
        let now = Utc::now();
        {
            let h = self
                .history
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if h.at.is_some_and(|at| now - at < HISTORY_EVERY) {
                return Ok(h.clone());
            }
        }
        let minutes = self
            .queue
            .throughput(&ThroughputQuery {
                since: now - HISTORY_SPAN,
                tenant_id: None,
                by: ThroughputBy::Minute,
            })
            .await?;
        let groups_hour = self
            .queue
            .throughput(&ThroughputQuery {
                since: now - chrono::TimeDelta::hours(1),
                tenant_id: None,
                by: ThroughputBy::LaneKind,
            })
            .await?;
        let waits = self.queue.wait_history(now - HISTORY_SPAN).await?;
        let fresh = Arc::new(History {
            at: Some(now),
            minutes,
            groups_hour,
            waits,
        });
        *self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh.clone();
        Ok(fresh)
    }

    /// Forgets the history read, so the next refresh reads it again (tests,
    /// after a settlement).
    pub fn history_stale(&self) {
        *self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(History::default());
    }
}

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    /// Viewers of one tenant within an interval share one read; a new
    /// interval reads again and sees what changed.
    #[tokio::test]
    async fn a_tenant_overview_reads_once_per_interval() {
        let queue = Queue::memory();
        let tenant = Uuid::from_u128(0xA1);
        let put = |q: &Queue| {
            let q = q.clone();
            async move {
                let item = drover::NewItem::new("k", serde_json::json!({})).with_tenant(tenant);
                q.enqueue_item(&drover::queue::Principal::system(), item)
                    .await
                    .expect("enqueue");
            }
        };
        put(&queue).await;
        let live = Live::new(queue.clone(), Duration::from_secs(3600));
        let first = live.counts_tenant(tenant).await.expect("counts");
        put(&queue).await;
        let again = live.counts_tenant(tenant).await.expect("counts");
        assert!(Arc::ptr_eq(&first, &again), "one read within the interval");
        assert_eq!(first.iter().map(|r| r.count).sum::<i64>(), 1);
        let short = Live::new(queue, Duration::ZERO);
        let fresh = short.counts_tenant(tenant).await.expect("counts");
        assert_eq!(fresh.iter().map(|r| r.count).sum::<i64>(), 2, "read anew");
    }

    /// Viewers of the dead letter within an interval share one scan per
    /// filter; an action's `dead_scan_stale` makes the next view read anew.
    #[tokio::test]
    async fn a_dead_letter_scan_reads_once_per_interval_until_an_action() {
        let queue = Queue::memory();
        let live = Live::new(queue.clone(), Duration::from_secs(3600));
        let scan = ListFilter {
            limit: 10,
            ..Default::default()
        };
        let item = drover::NewItem::new("k", serde_json::json!({}));
        queue
            .enqueue_item(&drover::queue::Principal::system(), item)
            .await
            .expect("enqueue");
        let first = live.dead_scan(&scan).await.expect("scan");
        queue
            .enqueue_item(
                &drover::queue::Principal::system(),
                drover::NewItem::new("k", serde_json::json!({})),
            )
            .await
            .expect("enqueue");
        let again = live.dead_scan(&scan).await.expect("scan");
        assert!(Arc::ptr_eq(&first, &again), "one read within the interval");
        assert_eq!(again.len(), 1);
        let other = ListFilter {
            limit: 5,
            ..Default::default()
        };
        assert_eq!(
            live.dead_scan(&other).await.expect("scan").len(),
            2,
            "per filter"
        );
        live.dead_scan_stale().await;
        assert_eq!(
            live.dead_scan(&scan).await.expect("scan").len(),
            2,
            "read anew"
        );
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;"
        );
    }
}
