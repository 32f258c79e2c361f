//! Wake-ups: what [`Store::wakeups`](super::Store::wakeups) delivers, and the
//! in-process channel each backend sends them on.
//!
//! A wake-up names a lane and, where the sender can give one, a **nonce**
//! that every listener of that one wake-up sees alike: PostgreSQL puts the
//! sending transaction's id into the `NOTIFY` payload (`<schema>:<lane>#<txid>`),
//! SQLite and memory count their in-process wake-ups. Workers sharing a lane
//! use the nonce to agree, without talking, which one of them claims at once
//! (`worker::spread`); a wake-up without one is a hint that any of them may
//! follow after its fallback delay.
//!
//! A wake-up may also name [`ANY_LANE`]: SQLite's watch of the file
//! (`sqlite::watch`) sends it when another process committed, since a
//! commit seen from outside does not say which lanes gained work. Every
//! listener treats it as a wake-up of each lane it serves (the outbox relay
//! included).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

/// Separates a lane from its nonce in a `NOTIFY` payload. No lane may contain
/// it ([`validate_lane`](drover_core::item::validate_lane)).
pub const NONCE_SEPARATOR: char = '#';

/// The name of a wake-up for every lane: something committed that the
/// sender cannot attribute to a lane (another process's commit to a SQLite
/// file). No lane may contain `*` ([`validate_lane`](drover_core::item::validate_lane)).
pub const ANY_LANE: &str = "*";

/// One wake-up: a lane that got work, and the nonce every listener of this
/// wake-up shares (`None`: the sender had none to give, e.g. a payload from
/// a trigger older than migration 0022, or PostgreSQL's in-process shortcut
/// that runs ahead of the transaction's `NOTIFY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The lane (or, for the outbox relay, [`OUTBOX_WAKE`](crate::outbox::OUTBOX_WAKE);
    /// or [`ANY_LANE`] for all of them).
    pub lane: String,
    /// Identical for every listener of this one wake-up.
    pub nonce: Option<u64>,
}

impl Wake {
    /// Whether this wake-up concerns every lane (and the outbox relay):
    /// [`ANY_LANE`].
    pub fn is_any(&self) -> bool {
        self.lane == ANY_LANE
    }

    /// Parses `<lane>` or `<lane>#<nonce>` (the part of a `NOTIFY` payload
    /// after the schema). A nonce that is not a number is dropped, and the
    /// wake-up kept as a hint.
    pub fn parse(payload: &str) -> Wake {
        match payload.rsplit_once(NONCE_SEPARATOR) {
            Some((lane, nonce)) => Wake {
                lane: lane.to_owned(),
                nonce: nonce.parse().ok(),
            },
            None => Wake {
                lane: payload.to_owned(),
                nonce: None,
            },
        }
    }
}

/// How many wake-ups a slow in-process subscriber may fall behind before it
/// sees `Lagged` (and should simply claim).
pub(crate) const WAKE_BUFFER: usize = 1024;

/// A store's in-process wake-up channel and the counter its nonces come
/// from. Clones share both.
#[derive(Debug, Clone)]
pub(crate) struct WakeBus {
    tx: broadcast::Sender<Wake>,
    seq: Arc<AtomicU64>,
}

impl WakeBus {
    /// A channel of [`WAKE_BUFFER`] wake-ups.
    pub(crate) fn new() -> Self {
        let (tx, _) = broadcast::channel(WAKE_BUFFER);
        WakeBus {
            tx,
            // Where the count starts matters little (the rule mixes the
            // nonce), but a random start keeps two stores from designating
            // in lockstep.
            seq: Arc::new(AtomicU64::new(rand::random::<u64>())),
        }
    }

    /// Sends a wake-up for `lane` with the next nonce of this store's count:
    /// every subscriber sees the same one. Returns the nonce (the
    /// PostgreSQL notifier sends it on to the other processes).
    pub(crate) fn counted(&self, lane: &str) -> u64 {
        let nonce = self.seq.fetch_add(1, Ordering::Relaxed);
        self.send(Wake {
            lane: lane.to_owned(),
            nonce: Some(nonce),
        });
        nonce
    }

    /// Sends a wake-up for `lane` without a nonce (a hint). Only the
    /// PostgreSQL store sends hints (its in-process shortcut ahead of the
    /// `NOTIFY`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn hint(&self, lane: &str) {
        self.send(Wake {
            lane: lane.to_owned(),
            nonce: None,
        });
    }

    /// Forwards a wake-up as received (the PostgreSQL listener).
    pub(crate) fn send(&self, wake: Wake) {
        // No subscriber is fine: a wake-up is a hint.
        let _ = self.tx.send(wake);
    }

    /// A new subscription.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Wake> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse_with_and_without_a_nonce() {
        assert_eq!(
            Wake::parse("emails#42"),
            Wake {
                lane: "emails".into(),
                nonce: Some(42)
            }
        );
        assert_eq!(
            Wake::parse("emails"),
            Wake {
                lane: "emails".into(),
                nonce: None
            }
        );
        // The outbox's name has a '.', never a '#'.
        assert_eq!(
            Wake::parse("drover.outbox#7"),
            Wake {
                lane: "drover.outbox".into(),
                nonce: Some(7)
            }
        );
        assert_eq!(Wake::parse("emails#x").nonce, None);
        assert_eq!(Wake::parse("emails#x").lane, "emails");
    }

    #[tokio::test]
    async fn every_subscriber_sees_the_same_counted_nonce() {
        let bus = WakeBus::new();
        let (mut a, mut b) = (bus.subscribe(), bus.subscribe());
        bus.counted("l");
        bus.counted("l");
        let (a1, a2) = (a.recv().await.unwrap(), a.recv().await.unwrap());
        let (b1, b2) = (b.recv().await.unwrap(), b.recv().await.unwrap());
        assert_eq!(a1, b1);
        assert_eq!(a2, b2);
        assert_ne!(a1.nonce, a2.nonce);
        assert!(a1.nonce.is_some());
    }
}
