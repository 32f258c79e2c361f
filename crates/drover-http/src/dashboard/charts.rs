//! The overview's charts: server-rendered SVG with labelled axes, drawn
//! with presentation attributes only (no inline style, which the
//! Content-Security-Policy forbids, and no script: they read without
//! JavaScript). Built from the store's per-minute history.

use chrono::{DateTime, TimeDelta, Utc};
use drover::store::throughput::{ThroughputRow, WaitRow};

use super::live::escape;

/// One bar of a chart: the minutes of `[start, start + width)` summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// Items that became done.
    pub done: i64,
    /// Items that became failed.
    pub failed: i64,
    /// Over the done items, available-to-done summed, in milliseconds.
    pub latency_ms_sum: i64,
    /// The longest available-to-done, in milliseconds.
    pub latency_ms_max: i64,
    /// The queue wait: the largest age of a lane's oldest pending and due
    /// item the sweep recorded in the bucket's minutes, in milliseconds.
    pub wait_ms_max: i64,
    /// Whether any minute of the bucket has a wait recorded (a minute
    /// with nothing waiting records nothing).
    pub wait_seen: bool,
}

impl Bucket {
    /// The mean available-to-done of the bucket's done items, in ms.
    pub fn latency_ms_mean(&self) -> i64 {
        if self.done > 0 {
            self.latency_ms_sum / self.done
        } else {
            0
        }
    }
}

/// The per-minute rows of the last `span` before `now` in `n` buckets,
/// oldest first (rows outside the span are left out).
pub fn buckets(
    rows: &[ThroughputRow],
    now: DateTime<Utc>,
    span: TimeDelta,
    n: usize,
) -> Vec<Bucket> {
    let n = n.max(1);
    let width = span / i32::try_from(n).unwrap_or(i32::MAX);
    let start = now - span;
    let mut out: Vec<Bucket> = (0..n)
        .map(|i| Bucket {
            start: start + width * i32::try_from(i).unwrap_or(0),
            done: 0,
            failed: 0,
            latency_ms_sum: 0,
            latency_ms_max: 0,
            wait_ms_max: 0,
            wait_seen: false,
        })
        .collect();
    for r in rows {
        let Some(i) = bucket_of(r.minute, now, span, n) else {
            continue;
        };
        let b = &mut out[i];
        b.done += r.done;
        b.failed += r.failed;
        b.latency_ms_sum += r.latency_ms_sum;
        b.latency_ms_max = b.latency_ms_max.max(r.latency_ms_max);
    }
    out
}

/// The bucket of `n` over the `span` before `now` that the minute starting
/// at `minute` counts in: the one its end falls in, so the newest bar holds
/// the minute that has just ended. `None` outside the span.
fn bucket_of(
    minute: DateTime<Utc>,
    now: DateTime<Utc>,
    span: TimeDelta,
    n: usize,
) -> Option<usize> {
    let n = n.max(1);
    let width = span / i32::try_from(n).unwrap_or(i32::MAX);
    let start = now - span;
    let at = minute + TimeDelta::minutes(1);
    if at <= start || minute > now {
        return None;
    }
    let width_ms = width.num_milliseconds().max(1);
    Some(
        usize::try_from((at - start).num_milliseconds().saturating_sub(1) / width_ms)
            .unwrap_or(0)
            .min(n - 1),
    )
}

/// Folds the queue wait rows (per minute and lane) into `bks`, built by
/// [`buckets`] over the same `now`, `span`: each bucket keeps the largest
/// oldest-waiting age of any lane in its minutes.
pub fn add_waits(bks: &mut [Bucket], rows: &[WaitRow], now: DateTime<Utc>, span: TimeDelta) {
    let n = bks.len();
    for r in rows {
        let Some(i) = bucket_of(r.minute, now, span, n) else {
            continue;
        };
        let b = &mut bks[i];
        b.wait_ms_max = b.wait_ms_max.max(r.oldest_ms);
        b.wait_seen = true;
    }
}

const W: f64 = 560.0;
const H: f64 = 200.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 40.0;

/// A duration in ms as a short label.
pub fn ms_label(ms: i64) -> String {
    match ms {
        i64::MIN..=999 => format!("{}ms", ms.max(0)),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{:.1}m", ms as f64 / 60_000.0),
        _ => format!("{:.1}h", ms as f64 / 3_600_000.0),
    }
}

/// The frame every chart shares: title, axes, y labels at 0, half and
/// max, x labels (UTC clock times) at five ticks, and the axis titles.
fn frame(id: &str, title: &str, y_title: &str, max_label: (&str, &str), bks: &[Bucket]) -> String {
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"{id}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{t}\">\
         <title>{t}</title>\
         <text x=\"{LEFT}\" y=\"14\" font-size=\"13\" font-weight=\"bold\" fill=\"#222\">{t}</text>\
         <line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{y0}\" stroke=\"#666\"/>\
         <line x1=\"{LEFT}\" y1=\"{y0}\" x2=\"{xr}\" y2=\"{y0}\" stroke=\"#666\"/>",
        t = escape(title),
        y0 = TOP + plot_h,
        xr = LEFT + plot_w,
    );
    for (frac, label) in [(0.0, "0"), (0.5, max_label.0), (1.0, max_label.1)] {
        let y = TOP + plot_h * (1.0 - frac);
        s.push_str(&format!(
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{LEFT}\" y2=\"{y:.1}\" stroke=\"#666\"/>\
             <text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\" fill=\"#333\" class=\"y-label\">{}</text>",
            LEFT - 4.0,
            LEFT - 6.0,
            y + 3.0,
            escape(label)
        ));
    }
    let n = bks.len().max(1);
    let end = bks.last().map(|b| {
        b.start
            + (b.start - bks.first().map_or(b.start, |f| f.start))
                / i32::try_from(n.saturating_sub(1).max(1)).unwrap_or(1)
    });
    for k in 0..=4usize {
        let i = (n * k) / 4;
        let at = if i < bks.len() {
            Some(bks[i].start)
        } else {
            end
        };
        let Some(at) = at else { continue };
        let x = LEFT + plot_w * (i as f64) / (n as f64);
        // The last label ends at the axis's end, so it is not cut off.
        let anchor = if k == 4 { "end" } else { "middle" };
        s.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{y1}\" stroke=\"#666\"/>\
             <text x=\"{x:.1}\" y=\"{y2}\" font-size=\"10\" text-anchor=\"{anchor}\" fill=\"#333\" class=\"x-label\">{}</text>",
            at.format("%H:%M"),
            y0 = TOP + plot_h,
            y1 = TOP + plot_h + 4.0,
            y2 = TOP + plot_h + 15.0,
        ));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#333\">time (UTC)</text>\
         <text x=\"12\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 12 {:.1})\">{}</text>",
        LEFT + plot_w / 2.0,
        H - 6.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_title)
    ));
    s
}

/// Done (green) and failed (red) items per bucket, stacked.
pub fn throughput_svg(id: &str, title: &str, per: &str, bks: &[Bucket]) -> String {
    let max = bks
        .iter()
        .map(|b| b.done + b.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let half = if max >= 2 {
        (max / 2).to_string()
    } else {
        String::new()
    };
    let mut s = frame(
        id,
        title,
        &format!("items per {per}"),
        (&half, &max.to_string()),
        bks,
    );
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / bks.len().max(1) as f64;
    for (i, b) in bks.iter().enumerate() {
        let x = LEFT + i as f64 * bw;
        let hd = plot_h * b.done as f64 / max as f64;
        let hf = plot_h * b.failed as f64 / max as f64;
        let when = b.start.format("%H:%M");
        if b.done > 0 {
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hd:.1}\" fill=\"#3b7\"><title>{when}: {} done</title></rect>",
                TOP + plot_h - hd,
                (bw - 1.0).max(0.5),
                b.done
            ));
        }
        if b.failed > 0 {
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hf:.1}\" fill=\"#d43\"><title>{when}: {} failed</title></rect>",
                TOP + plot_h - hd - hf,
                (bw - 1.0).max(0.5),
                b.failed
            ));
        }
    }
    let done: i64 = bks.iter().map(|b| b.done).sum();
    let failed: i64 = bks.iter().map(|b| b.failed).sum();
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"14\" font-size=\"11\" text-anchor=\"end\" fill=\"#333\" class=\"totals\">{done} done · {failed} failed</text></svg>",
        W - RIGHT
    ));
    s
}

/// The mean available-to-done of each bucket's done items (bars), with its
/// longest as a tick above.
pub fn latency_svg(id: &str, title: &str, bks: &[Bucket]) -> String {
    let max = bks
        .iter()
        .map(|b| b.latency_ms_max)
        .max()
        .unwrap_or(0)
        .max(1);
    let half = if max >= 2 {
        ms_label(max / 2)
    } else {
        String::new()
    };
    let mut s = frame(id, title, "available → done", (&half, &ms_label(max)), bks);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / bks.len().max(1) as f64;
    for (i, b) in bks.iter().enumerate().filter(|(_, b)| b.done > 0) {
        let x = LEFT + i as f64 * bw;
        let mean = b.latency_ms_mean();
        let h = plot_h * mean as f64 / max as f64;
        let hm = plot_h * b.latency_ms_max as f64 / max as f64;
        s.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#58c\"><title>{}: mean {}, max {}</title></rect>\
             <line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#235\"/>",
            TOP + plot_h - h,
            (bw - 1.0).max(0.5),
            b.start.format("%H:%M"),
            ms_label(mean),
            ms_label(b.latency_ms_max),
            x + (bw - 1.0).max(0.5),
            y = TOP + plot_h - hm,
        ));
    }
    let done: i64 = bks.iter().map(|b| b.done).sum();
    let sum: i64 = bks.iter().map(|b| b.latency_ms_sum).sum();
    let mean = if done > 0 { sum / done } else { 0 };
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"14\" font-size=\"11\" text-anchor=\"end\" fill=\"#333\" class=\"totals\">mean {} · max {}</text></svg>",
        W - RIGHT,
        ms_label(mean),
        ms_label(bks.iter().map(|b| b.latency_ms_max).max().unwrap_or(0))
    ));
    s
}

/// The queue wait alone: per bucket, the age of the oldest pending and
/// due item (the longest any lane's had) as the sweep recorded it.
pub fn queue_wait_svg(id: &str, title: &str, bks: &[Bucket]) -> String {
    let max = bks.iter().map(|b| b.wait_ms_max).max().unwrap_or(0).max(1);
    let half = if max >= 2 {
        ms_label(max / 2)
    } else {
        String::new()
    };
    let mut s = frame(id, title, "oldest waiting", (&half, &ms_label(max)), bks);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / bks.len().max(1) as f64;
    for (i, b) in bks.iter().enumerate().filter(|(_, b)| b.wait_seen) {
        let x = LEFT + i as f64 * bw;
        let h = plot_h * b.wait_ms_max as f64 / max as f64;
        s.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#c83\"><title>{}: oldest waiting {}</title></rect>",
            TOP + plot_h - h,
            (bw - 1.0).max(0.5),
            b.start.format("%H:%M"),
            ms_label(b.wait_ms_max),
        ));
    }
    let now = bks
        .last()
        .filter(|b| b.wait_seen)
        .map_or(0, |b| b.wait_ms_max);
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"14\" font-size=\"11\" text-anchor=\"end\" fill=\"#333\" class=\"totals\">latest {} · max {}</text></svg>",
        W - RIGHT,
        ms_label(now),
        ms_label(bks.iter().map(|b| b.wait_ms_max).max().unwrap_or(0))
    ));
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    fn row(minute: DateTime<Utc>, done: i64, failed: i64, ms: i64) -> ThroughputRow {
        ThroughputRow {
            minute,
            lane: String::new(),
            kind: String::new(),
            done,
            failed,
            latency_ms_sum: ms * done,
            latency_ms_max: ms,
        }
    }

    #[test]
    fn minutes_fall_in_their_buckets_and_old_ones_are_left_out() {
        let now: DateTime<Utc> = "2026-03-01T12:00:30Z".parse().unwrap();
        let m = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let rows = [
            row(m("2026-03-01T10:00:00Z"), 100, 0, 5),
            row(m("2026-03-01T11:01:00Z"), 3, 1, 200),
            row(m("2026-03-01T11:59:00Z"), 5, 0, 1000),
        ];
        let b = buckets(&rows, now, TimeDelta::hours(1), 60);
        assert_eq!(b.len(), 60);
        assert_eq!(b.iter().map(|b| b.done).sum::<i64>(), 8, "10:00 is out");
        assert_eq!(b[59].done, 5, "the minute just ended is the newest bar");
        assert_eq!(b.iter().map(|b| b.failed).sum::<i64>(), 1);
    }

    #[test]
    fn charts_have_axes_labels_and_no_inline_style() {
        let now: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().unwrap();
        let rows = [row("2026-03-01T11:30:00Z".parse().unwrap(), 4, 2, 1500)];
        let b = buckets(&rows, now, TimeDelta::hours(1), 60);
        let svg = throughput_svg("c1", "<last hour>", "minute", &b);
        assert!(svg.contains("&lt;last hour&gt;"));
        assert!(!svg.contains("style="));
        assert!(svg.contains("time (UTC)") && svg.contains("items per minute"));
        assert!(svg.contains(">11:00<") && svg.contains(">11:30<"), "{svg}");
        assert!(svg.contains("4 done · 2 failed"));
        let svg = latency_svg("c2", "wait", &b);
        assert!(svg.contains("mean 1.5s"), "{svg}");
        assert!(!svg.contains("style="));
    }

    #[test]
    fn queue_wait_keeps_the_longest_lane_per_bucket() {
        let now: DateTime<Utc> = "2026-03-01T12:00:30Z".parse().unwrap();
        let m = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let w = |minute: &str, lane: &str, ms: i64| WaitRow {
            minute: m(minute),
            lane: lane.into(),
            oldest_ms: ms,
        };
        let waits = [
            w("2026-03-01T10:00:00Z", "a", 99_000),
            w("2026-03-01T11:30:00Z", "a", 4_000),
            w("2026-03-01T11:30:00Z", "b", 90_000),
            w("2026-03-01T11:59:00Z", "a", 2_500),
        ];
        let mut b = buckets(&[], now, TimeDelta::hours(1), 60);
        add_waits(&mut b, &waits, now, TimeDelta::hours(1));
        assert_eq!(b.iter().filter(|b| b.wait_seen).count(), 2, "10:00 is out");
        assert_eq!(
            b[59].wait_ms_max, 2_500,
            "the minute just ended is the newest bar"
        );
        assert_eq!(b.iter().map(|b| b.wait_ms_max).max(), Some(90_000));
        let svg = queue_wait_svg("q1", "Last hour: queue wait", &b);
        assert!(svg.contains("oldest waiting") && svg.contains("time (UTC)"));
        assert!(svg.contains(">11:30<"), "{svg}");
        assert!(svg.contains("latest 2.5s · max 1.5m"), "{svg}");
        assert!(svg.contains("11:30: oldest waiting 1.5m"), "{svg}");
        assert!(!svg.contains("style="));
    }
}
