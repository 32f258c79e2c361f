//! The pure part of the scheduler: which ticks are due between a schedule's
//! last enqueued tick and now, and which of them a misfire policy fires.
//!
//! Every instant here is UTC; the cron expression is evaluated in the
//! schedule's zone by croner, whose DST rules are drover's (see the README):
//! a fixed time that falls in a spring-forward gap fires at the first valid
//! instant after the gap, a fixed time repeated by a fall-back fires once
//! (its first occurrence), and wildcard fields fire for every instant that
//! exists.

use chrono::{DateTime, Utc};

use super::schedule::{Compiled, MisfirePolicy};

/// The most missed ticks counted for a report; past it the count says
/// "at least". Bounds the work one run does after a long outage of a
/// schedule that fires every second.
pub const MISSED_COUNT_CAP: u64 = 100_000;

/// Ticks strictly after `after`, ascending, in UTC.
pub(crate) fn ticks_after(
    s: &Compiled,
    after: DateTime<Utc>,
) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    s.cron
        .iter_after(after.with_timezone(&s.zone))
        .map(|t| t.with_timezone(&Utc))
}

/// Ticks strictly before `before`, descending, in UTC.
fn ticks_before(s: &Compiled, before: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    s.cron
        .iter_before(before.with_timezone(&s.zone))
        .map(|t| t.with_timezone(&Utc))
}

/// What one run should do for one schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The ticks to enqueue, ascending (each keyed by itself).
    pub fire: Vec<DateTime<Utc>>,
    /// The new last tick, when anything was due.
    pub advance_to: Option<DateTime<Utc>>,
    /// Due ticks later than the grace.
    pub missed: u64,
    /// Missed ticks not enqueued (the policy skipped, merged or capped them).
    pub dropped: u64,
}

/// Plans the ticks in `(start, now]`: those at most `grace` old run as they
/// are; the older ones are missed and go by `policy`.
pub fn plan(
    s: &Compiled,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    grace: chrono::Duration,
) -> Plan {
    let mut out = Plan::default();
    // The latest due tick: one backwards step from just after now.
    let Some(latest) = ticks_before(s, now + chrono::Duration::microseconds(1)).next() else {
        return out;
    };
    if latest <= start {
        return out;
    }
    out.advance_to = Some(latest);
    let boundary = now - grace;
    let on_time: Vec<DateTime<Utc>> =
        ticks_after(s, start.max(boundary - chrono::Duration::microseconds(1)))
            .take_while(|t| *t <= now)
            .filter(|t| *t > start)
            .collect();
    let missed: Vec<DateTime<Utc>> = if start < boundary {
        match s.misfire() {
            MisfirePolicy::Skip => Vec::new(),
            MisfirePolicy::Once => ticks_before(s, boundary)
                .take_while(|t| *t > start)
                .take(1)
                .collect(),
            MisfirePolicy::All { max_backfill } => {
                let mut v: Vec<_> = ticks_before(s, boundary)
                    .take_while(|t| *t > start)
                    .take(max_backfill as usize)
                    .collect();
                v.reverse();
                v
            }
        }
    } else {
        Vec::new()
    };
    if start < boundary {
        out.missed = ticks_after(s, start)
            .take_while(|t| *t < boundary)
            .take(MISSED_COUNT_CAP as usize)
            .count() as u64;
    }
    out.dropped = out.missed.saturating_sub(missed.len() as u64);
    out.fire = missed;
    out.fire.extend(on_time);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::periodic::Schedule;
    use chrono::TimeZone;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct J {}
    impl crate::Kind for J {
        const NAME: &'static str = "j";
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn minutely(policy: MisfirePolicy) -> Compiled {
        Schedule::new("m", "* * * * *", J {})
            .misfire(policy)
            .compile()
            .unwrap()
    }

    #[test]
    fn one_due_tick_fires_itself() {
        let s = minutely(MisfirePolicy::Once);
        let p = plan(
            &s,
            utc(2026, 1, 1, 0, 0, 0),
            utc(2026, 1, 1, 0, 1, 5),
            chrono::Duration::seconds(60),
        );
        assert_eq!(p.fire, vec![utc(2026, 1, 1, 0, 1, 0)]);
        assert_eq!(p.advance_to, Some(utc(2026, 1, 1, 0, 1, 0)));
        assert_eq!((p.missed, p.dropped), (0, 0));
    }

    #[test]
    fn nothing_due_before_the_next_tick() {
        let s = minutely(MisfirePolicy::Once);
        let p = plan(
            &s,
            utc(2026, 1, 1, 0, 1, 0),
            utc(2026, 1, 1, 0, 1, 59),
            chrono::Duration::seconds(60),
        );
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn a_tick_exactly_now_is_due() {
        let s = minutely(MisfirePolicy::Once);
        let p = plan(
            &s,
            utc(2026, 1, 1, 0, 0, 0),
            utc(2026, 1, 1, 0, 1, 0),
            chrono::Duration::seconds(60),
        );
        assert_eq!(p.fire, vec![utc(2026, 1, 1, 0, 1, 0)]);
    }
}
