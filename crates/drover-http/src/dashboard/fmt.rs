//! How the pages write times, durations and ids: relative to now for
//! reading at a glance, absolute (RFC 3339, UTC) beside it or in its title
//! for exactness, and ids shortened to their last 8 hex digits with the whole id kept
//! for copying.

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

/// A time as the pages show it.
#[derive(Debug, Clone, Default)]
pub(super) struct When {
    /// RFC 3339, UTC, to the second.
    pub abs: String,
    /// Relative to the page's now: `12s ago`, `in 5m`, `3h ago`.
    pub rel: String,
}

/// `t` as the pages show it, against `now`.
pub(super) fn when(t: DateTime<Utc>, now: DateTime<Utc>) -> When {
    When {
        abs: t.to_rfc3339_opts(SecondsFormat::Secs, true),
        rel: relative(t, now),
    }
}

/// `t` against `now` in words: `now`, `12s ago`, `in 5m`, `3h ago`, `2d ago`.
pub(super) fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - t).num_seconds();
    let n = secs.unsigned_abs();
    if n == 0 {
        return "now".into();
    }
    let span = match n {
        0..=59 => format!("{n}s"),
        60..=3599 => format!("{}m", n / 60),
        3600..=86_399 => format!("{}h", n / 3600),
        _ => format!("{}d", n / 86_400),
    };
    if secs > 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// A duration in words: `850 ms`, `12.3 s`, `4m 03s`, `2h 05m`.
pub(super) fn duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// An id's last 8 hex digits (see `actors::short_id`).
pub(super) fn short(id: Uuid) -> String {
    crate::actors::short_id(id)
}

/// A payload's first `max` characters on one line (an ellipsis when cut).
pub(super) fn preview(payload: &serde_json::Value, max: usize) -> String {
    let text = payload.to_string();
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_reads_both_ways() {
        let now = Utc::now();
        assert_eq!(relative(now, now), "now");
        assert_eq!(
            relative(now - chrono::Duration::seconds(12), now),
            "12s ago"
        );
        assert_eq!(relative(now + chrono::Duration::minutes(5), now), "in 5m");
        assert_eq!(relative(now - chrono::Duration::hours(3), now), "3h ago");
        assert_eq!(relative(now - chrono::Duration::days(2), now), "2d ago");
    }

    #[test]
    fn durations_and_previews() {
        assert_eq!(duration(chrono::Duration::milliseconds(850)), "850 ms");
        assert_eq!(duration(chrono::Duration::milliseconds(12_340)), "12.3 s");
        assert_eq!(duration(chrono::Duration::seconds(243)), "4m 03s");
        assert_eq!(duration(chrono::Duration::minutes(125)), "2h 05m");
        let v = serde_json::json!({"a": "x".repeat(100)});
        let p = preview(&v, 20);
        assert_eq!(p.chars().count(), 21);
        assert!(p.ends_with('…'));
        assert_eq!(preview(&serde_json::json!(1), 20), "1");
    }
}
