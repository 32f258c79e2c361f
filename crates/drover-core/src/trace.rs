//! The W3C trace context an item carries (`traceparent`): its format and
//! its parts, checked here once for every enqueue path.
//!
//! The accepted form is version `00` of the W3C Trace Context header:
//! `00-<trace id: 32 lowercase hex>-<parent id: 16 lowercase hex>-<flags: 2
//! lowercase hex>`, 55 characters, where neither id is all zeros (the spec
//! makes an all-zero id invalid). Anything else is refused at enqueue with
//! `InvalidInput` on `traceparent`, so a worker never has to guess what a
//! stored value means.

use crate::error::{Error, Result};

/// The parts of a valid `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id (16 bytes, not all zero).
    pub trace_id: [u8; 16],
    /// The id of the span that caused the item (8 bytes, not all zero).
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a W3C `traceparent` of version `00`.
    ///
    /// ```
    /// use drover_core::trace::TraceParent;
    /// let t = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    /// assert_eq!(t.flags, 1);
    /// assert!(TraceParent::parse("00-00000000000000000000000000000000-b7ad6b7169203331-01").is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `traceparent`, naming what is wrong.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |reason: &str| Error::invalid("traceparent", reason.to_owned());
        let b = s.as_bytes();
        if b.len() != 55 {
            return Err(bad(
                "must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags> (55 characters)",
            ));
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return Err(bad(
                "must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags> (dashes at 2, 35, 52)",
            ));
        }
        let version = hex::<1>(&b[0..2]).ok_or_else(|| bad("version is not lowercase hex"))?;
        if version != [0] {
            return Err(bad("only version 00 is accepted"));
        }
        let trace_id =
            hex::<16>(&b[3..35]).ok_or_else(|| bad("trace id is not 32 lowercase hex digits"))?;
        let span_id =
            hex::<8>(&b[36..52]).ok_or_else(|| bad("parent id is not 16 lowercase hex digits"))?;
        let [flags] =
            hex::<1>(&b[53..55]).ok_or_else(|| bad("flags are not 2 lowercase hex digits"))?;
        if trace_id == [0; 16] {
            return Err(bad("trace id is all zeros"));
        }
        if span_id == [0; 8] {
            return Err(bad("parent id is all zeros"));
        }
        Ok(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }
}

/// Checks a `traceparent` (see [`TraceParent::parse`]).
///
/// # Errors
/// [`Error::InvalidInput`] on `traceparent`.
pub fn validate_traceparent(s: &str) -> Result<()> {
    TraceParent::parse(s).map(|_| ())
}

fn hex<const N: usize>(digits: &[u8]) -> Option<[u8; N]> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if digits.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn refused(s: &str) -> String {
        match TraceParent::parse(s) {
            Err(Error::InvalidInput { field, reason }) => {
                assert_eq!(field, "traceparent");
                reason
            }
            other => panic!("{s:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn parses_the_w3c_example() {
        let t = TraceParent::parse(GOOD).unwrap();
        assert_eq!(t.trace_id[0], 0x0a);
        assert_eq!(t.trace_id[15], 0x9c);
        assert_eq!(t.span_id, [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]);
        assert_eq!(t.flags, 1);
        validate_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00").unwrap();
    }

    #[test]
    fn refuses_all_zero_ids() {
        assert!(
            refused("00-00000000000000000000000000000000-b7ad6b7169203331-01").contains("trace id")
        );
        assert!(
            refused("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01")
                .contains("parent id")
        );
    }

    #[test]
    fn refuses_wrong_shape_case_version_and_text() {
        for s in [
            "",
            "not a traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333x-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0z",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-é",
        ] {
            refused(s);
        }
    }
}
