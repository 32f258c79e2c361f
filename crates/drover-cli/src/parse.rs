//! From raw command-line text to checked values, each failure naming its
//! field as [`drover::Error::InvalidInput`] does. Clap hands these over as
//! strings so every refusal is one line naming the field, never a usage
//! dump.

use std::time::Duration;

use chrono::{DateTime, Utc};
use drover::Status;
use uuid::Uuid;

use crate::error::CliError;

/// Parses a UUID for `field`.
pub(crate) fn uuid(field: &'static str, text: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(text.trim()).map_err(|_| {
        CliError::invalid(
            field,
            "is not a UUID (expected 32 hex digits, e.g. 0190a1b2-…)",
        )
    })
}

/// Parses an optional tenant, nil (single-tenant use) when absent.
pub(crate) fn tenant(text: Option<&str>) -> Result<Uuid, CliError> {
    text.map_or(Ok(Uuid::nil()), |t| uuid("tenant", t))
}

/// Parses a status name.
pub(crate) fn status(text: &str) -> Result<Status, CliError> {
    Ok(text.parse::<Status>()?)
}

/// Parses a humantime duration (`30s`, `5m`, `1h 30m`) for `field`; a
/// negative or malformed one is refused.
pub(crate) fn duration(field: &'static str, text: &str) -> Result<Duration, CliError> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(CliError::invalid(field, "must not be negative"));
    }
    humantime::parse_duration(t).map_err(|e| {
        CliError::invalid(
            field,
            format!("is not a duration like 30s, 5m or 1h 30m ({e})"),
        )
    })
}

/// Parses an RFC 3339 timestamp for `field`.
pub(crate) fn timestamp(field: &'static str, text: &str) -> Result<DateTime<Utc>, CliError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            CliError::invalid(
                field,
                format!("is not an RFC 3339 time like 2030-01-02T03:04:05Z ({e})"),
            )
        })
}

/// Parses an integer for `field` within `min..=max`.
pub(crate) fn int<T>(field: &'static str, text: &str, min: T, max: T) -> Result<T, CliError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let v: T = text
        .trim()
        .parse()
        .map_err(|_| CliError::invalid(field, format!("is not an integer from {min} to {max}")))?;
    if v < min || v > max {
        return Err(CliError::invalid(
            field,
            format!("must be from {min} to {max}, got {v}"),
        ));
    }
    Ok(v)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn negative_and_malformed_delays_name_the_field() {
        for bad in ["-5s", "soon", "", "5 parsecs"] {
            let e = duration("delay", bad).expect_err(bad);
            assert!(e.to_string().starts_with("invalid delay:"), "{e}");
        }
        assert_eq!(
            duration("delay", "1m 30s").ok(),
            Some(Duration::from_secs(90))
        );
    }

    #[test]
    fn ints_are_range_checked() {
        assert!(int::<i32>("max_attempts", "0", 1, i32::MAX).is_err());
        assert_eq!(
            int::<i16>("priority", "-3", i16::MIN, i16::MAX).ok(),
            Some(-3)
        );
        assert!(int::<i16>("priority", "40000", i16::MIN, i16::MAX).is_err());
    }

    #[test]
    fn bad_uuid_names_the_field() {
        let e = uuid("tenant", "nope").expect_err("bad");
        assert!(e.to_string().starts_with("invalid tenant:"));
    }
}
