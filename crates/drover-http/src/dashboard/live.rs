//! The shared live view: one query set per interval, whoever is watching.
//!
//! One refresher reads counts, gauges, workers and lane states every
//! interval, keeps the newest snapshot for page views (a page view never
//! queries the counts itself) and a history of the done and failed totals
//! for the throughput charts, and broadcasts the rendered overview to every
//! open tab over server-sent events. Ten tabs cost the database what one
//! does. The history starts when the process does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use drover::Queue;
use drover::Status;
use drover::store::{CountRow, Gauges, WorkerRow};
use tokio::sync::{RwLock, broadcast};

/// How often the live view is refreshed when none is configured.
pub const LIVE_INTERVAL_DEFAULT: Duration = Duration::from_secs(2);
/// How far back the history reaches: the day chart.
const HISTORY_SPAN: chrono::TimeDelta = chrono::TimeDelta::hours(24);

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

    fn total(&self, status: Status) -> i64 {
        self.counts
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.count)
            .sum()
    }
}

/// One history sample: the done and failed totals at an instant.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: DateTime<Utc>,
    done: i64,
    failed: i64,
}

/// The shared live view. See the module docs.
pub struct Live {
    queue: Queue,
    interval: Duration,
    latest: RwLock<Option<Arc<Snapshot>>>,
    history: Mutex<VecDeque<Sample>>,
    tx: broadcast::Sender<Arc<Snapshot>>,
    started: AtomicBool,
    refreshes: AtomicU64,
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
            history: Mutex::new(VecDeque::new()),
            tx,
            started: AtomicBool::new(false),
            refreshes: AtomicU64::new(0),
        })
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
        let read = async {
            let counts = self.queue.counts().await?;
            let gauges = self.queue.gauges().await?;
            let workers = self.queue.workers().await?;
            let paused = self.queue.lanes_paused().await?;
            drover::Result::Ok((counts, gauges, workers, paused))
        };
        let snap = match read.await {
            Ok((counts, gauges, workers, paused)) => Snapshot {
                at: Utc::now(),
                counts,
                gauges,
                workers,
                paused,
                error: None,
            },
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
                        error: None,
                    },
                    |s| (*s).clone(),
                );
                s.error = Some(e.to_string());
                s
            }
        };
        let snap = Arc::new(snap);
        if snap.error.is_none() {
            let mut h = self
                .history
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            h.push_back(Sample {
                at: snap.at,
                done: snap.total(Status::Done),
                failed: snap.total(Status::Failed),
            });
            while h.front().is_some_and(|s| snap.at - s.at > HISTORY_SPAN) {
                h.pop_front();
            }
        }
        *self.latest.write().await = Some(snap.clone());
        // No subscriber is normal: nobody has the overview open.
        let _ = self.tx.send(snap.clone());
        snap
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

    /// Items done and failed per bucket over the last `span`, in `buckets`
    /// buckets, oldest first, from the history's deltas (a purge that
    /// lowers a total counts as zero, never negative).
    pub fn series(
        &self,
        now: DateTime<Utc>,
        span: chrono::TimeDelta,
        buckets: usize,
    ) -> (Vec<i64>, Vec<i64>) {
        let mut done = vec![0i64; buckets];
        let mut failed = vec![0i64; buckets];
        let h = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = now - span;
        let width = span.num_milliseconds().max(1) as f64 / buckets.max(1) as f64;
        for pair in h.iter().collect::<Vec<_>>().windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.at < start || b.at > now {
                continue;
            }
            let i = (((b.at - start).num_milliseconds() as f64) / width) as usize;
            let i = i.min(buckets.saturating_sub(1));
            done[i] += (b.done - a.done).max(0);
            failed[i] += (b.failed - a.failed).max(0);
        }
        (done, failed)
    }
}

/// A bar chart as an SVG element, drawn with presentation attributes only
/// (no inline style, which the Content-Security-Policy forbids).
pub fn bars_svg(title: &str, done: &[i64], failed: &[i64]) -> String {
    const W: f64 = 480.0;
    const H: f64 = 120.0;
    let max = done
        .iter()
        .zip(failed)
        .map(|(d, f)| d + f)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = done.len().max(1) as f64;
    let bw = W / n;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {W} {}\" role=\"img\" aria-label=\"{}\">",
        H + 20.0,
        escape(title)
    );
    for (i, (d, f)) in done.iter().zip(failed).enumerate() {
        let x = i as f64 * bw;
        let hd = H * (*d as f64) / max;
        let hf = H * (*f as f64) / max;
        s.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hd:.1}\" fill=\"#3b7\"><title>{d} done</title></rect>",
            H - hd,
            (bw - 1.0).max(0.5)
        ));
        if *f > 0 {
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hf:.1}\" fill=\"#d43\"><title>{f} failed</title></rect>",
                H - hd - hf,
                (bw - 1.0).max(0.5)
            ));
        }
    }
    let total_d: i64 = done.iter().sum();
    let total_f: i64 = failed.iter().sum();
    s.push_str(&format!(
        "<text x=\"0\" y=\"{}\" font-size=\"12\" fill=\"#333\">{}: {total_d} done, {total_f} failed (max {} per bar)</text></svg>",
        H + 16.0,
        escape(title),
        max as i64
    ));
    s
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

    #[test]
    fn chart_text_is_escaped_and_has_no_inline_style() {
        let svg = bars_svg("<b>", &[1, 2], &[0, 1]);
        assert!(svg.contains("&lt;b&gt;"));
        assert!(!svg.contains("style="));
        assert_eq!(svg.matches("<rect").count(), 3);
    }

    #[tokio::test]
    async fn deltas_of_the_totals_fill_the_buckets() {
        let live = Live::new(Queue::memory(), LIVE_INTERVAL_DEFAULT);
        let now = Utc::now();
        {
            let mut h = live.history.lock().unwrap();
            for (mins_ago, done, failed) in [(50, 0, 0), (40, 10, 1), (5, 25, 1), (1, 20, 2)] {
                h.push_back(Sample {
                    at: now - chrono::TimeDelta::minutes(mins_ago),
                    done,
                    failed,
                });
            }
        }
        let (d, f) = live.series(now, chrono::TimeDelta::hours(1), 60);
        assert_eq!(
            d.iter().sum::<i64>(),
            25,
            "a lower total (a purge) counts zero"
        );
        assert_eq!(f.iter().sum::<i64>(), 2);
        assert_eq!(d[20], 10);
    }
}
