//! The pure part of the scheduler: which ticks are due between a schedule's
//! last enqueued tick and now, which of them a misfire policy fires, and a
//! compiled schedule's next ticks ([`Compiled::next_ticks`]). It computes
//! on what `schedule` declares and compiles; `schedule` never calls back.
//!
//! Every instant here is UTC; the cron expression is evaluated in the
//! schedule's zone by croner, whose DST rules are drover's (see the README):
//! a fixed time that falls in a spring-forward gap fires at the first valid
//! instant after the gap, a fixed time repeated by a fall-back fires once
//! (its first occurrence), and wildcard fields fire for every instant that
//! exists.

use chrono::{DateTime, SubsecRound, Utc};

use super::schedule::{Compiled, MisfirePolicy};

/// The most missed ticks counted for a report; past it the count says
/// "at least". Bounds the work one run does after a long outage of a
/// schedule that fires every second.
pub const MISSED_COUNT_CAP: u64 = 100_000;

/// `t` rounded down to the whole second. Ticks are whole seconds, so
/// every comparison with a tick can be made on the floor, and croner's
/// searches are only ever handed whole seconds.
fn floor_sec(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(0)
}

/// Ticks strictly after `after`, ascending, in UTC.
fn ticks_after(s: &Compiled, after: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    s.cron
        .iter_after(floor_sec(after).with_timezone(&s.zone))
        .map(|t| t.with_timezone(&Utc))
}

// The tick arithmetic of a compiled schedule is this module's, so its
// public reading lives here too: `schedule` declares, `plan` computes.
impl Compiled {
    /// The next `n` ticks strictly after `after`, in UTC.
    pub fn next_ticks(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        ticks_after(self, after).take(n).collect()
    }
}

/// The next `n` ticks strictly after `after`, in UTC, of a cron expression
/// in an IANA zone as a schedule declares them (a state row's `cron` and
/// `zone`), parsed as [`Schedule::compile`](super::Schedule::compile)
/// parses them: for readers that hold the row, not the schedule (the
/// dashboard). `None` when either does not parse.
pub fn next_ticks_of(
    cron: &str,
    zone: &str,
    after: DateTime<Utc>,
    n: usize,
) -> Option<Vec<DateTime<Utc>>> {
    let cron = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(cron)
        .ok()?;
    let zone: chrono_tz::Tz = zone.parse().ok()?;
    Some(
        cron.iter_after(floor_sec(after).with_timezone(&zone))
            .take(n)
            .map(|t| t.with_timezone(&Utc))
            .collect(),
    )
}

/// Ticks at or before `at`, descending, in UTC.
fn ticks_at_or_before(s: &Compiled, at: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
    s.cron
        .iter_from(
            floor_sec(at).with_timezone(&s.zone),
            croner::Direction::Backward,
        )
        .map(|t| t.with_timezone(&Utc))
}

/// Ticks strictly before `before`, descending, in UTC.
fn ticks_before(
    s: &Compiled,
    before: DateTime<Utc>,
) -> Box<dyn Iterator<Item = DateTime<Utc>> + '_> {
    let floor = floor_sec(before);
    if floor == before {
        Box::new(
            s.cron
                .iter_before(floor.with_timezone(&s.zone))
                .map(|t| t.with_timezone(&Utc)),
        )
    } else {
        // A tick at the floor is before a fractional `before`.
        Box::new(ticks_at_or_before(s, floor))
    }
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
    let Some(latest) = ticks_at_or_before(s, now).next() else {
        return out;
    };
    if latest <= start {
        return out;
    }
    out.advance_to = Some(latest);
    let boundary = now - grace;
    let mut on_time: Vec<DateTime<Utc>> = ticks_at_or_before(s, now)
        .take_while(|t| *t >= boundary && *t > start)
        .collect();
    on_time.reverse();
    let missed: Vec<DateTime<Utc>> = if start < boundary {
        let before = ticks_before(s, boundary).take_while(|t| *t > start);
        match s.misfire() {
            MisfirePolicy::Skip => Vec::new(),
            MisfirePolicy::Once => before.take(1).collect(),
            MisfirePolicy::All { max_backfill } => {
                let mut v: Vec<_> = before.take(max_backfill as usize).collect();
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

    #[test]
    fn next_ticks_of_a_row_reads_cron_and_zone() {
        let at = Utc.with_ymd_and_hms(2026, 3, 1, 10, 30, 0).unwrap();
        let ticks = next_ticks_of("0 * * * *", "Europe/Paris", at, 3).unwrap();
        let want: Vec<_> = (11..14)
            .map(|h| Utc.with_ymd_and_hms(2026, 3, 1, h, 0, 0).unwrap())
            .collect();
        assert_eq!(ticks, want);
        assert!(next_ticks_of("not cron", "UTC", at, 3).is_none());
        assert!(next_ticks_of("* * * * *", "Mars/Base", at, 3).is_none());
    }

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

    /// A run at a fractional instant: the tick just past the grace is
    /// missed (and is the one `once` catches up), not lost between the
    /// on-time and missed sets.
    #[test]
    fn a_tick_just_past_the_grace_at_a_fractional_now_is_caught_up() {
        let s = minutely(MisfirePolicy::Once);
        let start = utc(2026, 1, 1, 0, 0, 0);
        let now = utc(2026, 1, 1, 0, 12, 0) + chrono::Duration::milliseconds(500);
        let p = plan(&s, start, now, chrono::Duration::seconds(60));
        // 00:11 is 60.5 s late: missed; 00:12 on time; 00:01..00:11 missed.
        assert_eq!(
            p.fire,
            vec![utc(2026, 1, 1, 0, 11, 0), utc(2026, 1, 1, 0, 12, 0)]
        );
        assert_eq!((p.missed, p.dropped), (11, 10));
        let all = minutely(MisfirePolicy::All { max_backfill: 100 });
        let p = plan(&all, start, now, chrono::Duration::seconds(60));
        assert_eq!(p.fire.len(), 12, "{:?}", p.fire);
        assert_eq!(p.fire.first(), Some(&utc(2026, 1, 1, 0, 1, 0)));
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
