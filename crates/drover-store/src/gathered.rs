//! The gathered write: a batch of requests, each with its own
//! `Idempotency-Key` marker (or none), written whole: the markers claimed,
//! the items inserted, then each request's answer stored in its marker and
//! the lot committed ([`Store::item_insert_each_claimed`]).
//!
//! The write runs in two steps the caller drives, so no callback of an
//! outer layer runs inside a backend: [`Store::item_insert_each_claimed`]
//! claims and inserts and hands back a [`Gathered`] holding each input's
//! outcome; the caller renders its answers from those outcomes (the HTTP
//! response bodies are its business, not the store's) and gives them back
//! as data to [`Gathered::commit`], which stores them with the items.
//!
//! Invariants (contract cases in `contract/access.rs`):
//! - On PostgreSQL the claims, the items and the answers are one
//!   transaction: an item and the answer that names it commit together,
//!   and a batch that is dropped or fails leaves neither item nor marker.
//! - Elsewhere (the default) the claims are their own transaction, the
//!   inserts a second and the answers a third; a failed insert gives its
//!   claims up so a retry runs again.
//! - An input whose marker started and that is given no answer has its
//!   marker released at commit: a retry of it runs again, never meets a
//!   marker left in flight.

use async_trait::async_trait;

use crate::Store;
use crate::access::{Claimed, MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{Inserted, NewItem};

/// One input's answer as the caller made it: HTTP status and body.
pub type Answer = (u16, String);

/// A gathered batch between its insert and its commit (see the module
/// docs). Dropping it without [`Gathered::commit`] rolls the batch back on
/// PostgreSQL; elsewhere its items stay and its started markers are taken
/// over once stale.
#[async_trait]
pub trait Gathered: Send {
    /// What became of each input, one per input in order.
    fn outcomes(&self) -> &[Claimed];

    /// Stores `answers[i]` in input i's marker where that marker was
    /// started by this batch (other entries are not read), releases the
    /// started markers given `None`, commits, and returns the outcomes.
    ///
    /// # Errors
    /// The store's error: on PostgreSQL nothing of the batch was written.
    async fn commit(self: Box<Self>, answers: &[Option<Answer>]) -> Result<Vec<Claimed>>;
}

/// The split of a gathered batch once its markers are claimed: which
/// inputs are inserted, which are settled by their marker, and which
/// markers it started. Shared by the default write and PostgreSQL's
/// one-transaction one.
pub(crate) struct ClaimedPlan {
    out: Vec<Option<Claimed>>,
    /// The inputs to insert.
    pub(crate) items: Vec<NewItem>,
    /// Each insert's input index.
    at: Vec<usize>,
    /// The marker each input started, if it did.
    started: Vec<Option<MarkerKey>>,
}

impl ClaimedPlan {
    /// Splits the batch: `begun` holds one outcome per present claim, in
    /// order.
    pub(crate) fn new(
        claims: &[Option<MarkerClaim>],
        prepared: Vec<Result<NewItem>>,
        begun: Vec<MarkerBegin>,
    ) -> ClaimedPlan {
        let n = prepared.len();
        let mut plan = ClaimedPlan {
            out: Vec::with_capacity(n),
            items: Vec::with_capacity(n),
            at: Vec::with_capacity(n),
            started: vec![None; n],
        };
        let mut begun = begun.into_iter();
        for (i, p) in prepared.into_iter().enumerate() {
            if let Some(c) = claims.get(i).and_then(Option::as_ref) {
                match begun.next() {
                    Some(MarkerBegin::Started) => plan.started[i] = Some(c.key.clone()),
                    Some(other) => {
                        plan.out.push(Some(Claimed::Settled(other)));
                        continue;
                    }
                    None => {
                        plan.out.push(Some(Claimed::Written(Err(unanswered(
                            "a marker claim was not answered",
                        )))));
                        continue;
                    }
                }
            }
            match p {
                Ok(item) => {
                    plan.items.push(item);
                    plan.at.push(i);
                    plan.out.push(None);
                }
                Err(e) => plan.out.push(Some(Claimed::Written(Err(e)))),
            }
        }
        plan
    }

    /// Whether the batch writes nothing: every input settled by its
    /// marker, none refused with a marker to answer.
    #[cfg(feature = "postgres")]
    pub(crate) fn writes_nothing(&self) -> bool {
        self.items.is_empty() && self.started.iter().all(Option::is_none)
    }

    /// The markers this batch started (to give up when the write fails).
    pub(crate) fn started_keys(&self) -> impl Iterator<Item = &MarkerKey> {
        self.started.iter().flatten()
    }

    /// The batch's outcome, given the inserts' results in order.
    pub(crate) fn finish(mut self, written: Vec<Result<Inserted>>) -> Written {
        for (j, r) in written.into_iter().enumerate() {
            if let Some(&i) = self.at.get(j) {
                self.out[i] = Some(Claimed::Written(r));
            }
        }
        let outcomes = self
            .out
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Claimed::Written(Err(unanswered("an item was not answered"))))
            })
            .collect();
        Written {
            outcomes,
            started: self.started,
        }
    }
}

fn unanswered(what: &str) -> Error {
    Error::Storage(Opaque::msg(what.to_owned()))
}

/// A batch's outcomes and the markers it started, waiting for answers.
pub(crate) struct Written {
    pub(crate) outcomes: Vec<Claimed>,
    started: Vec<Option<MarkerKey>>,
}

impl Written {
    /// The answers to store (one per started marker given one) and the
    /// started markers given none (to release).
    pub(crate) fn answers(
        &self,
        answers: &[Option<Answer>],
    ) -> (Vec<MarkerAnswer>, Vec<MarkerKey>) {
        let mut store = Vec::new();
        let mut release = Vec::new();
        for (i, key) in self.started.iter().enumerate() {
            let Some(key) = key else { continue };
            match answers.get(i).and_then(Option::as_ref) {
                Some((status, body)) => store.push(MarkerAnswer {
                    key: key.clone(),
                    status: *status,
                    body: body.clone(),
                }),
                None => release.push(key.clone()),
            }
        }
        (store, release)
    }
}

/// Releases markers a committed batch left unanswered; a failure is only
/// logged (the marker is taken over once stale).
pub(crate) async fn release_unanswered<S: Store + ?Sized>(store: &S, keys: &[MarkerKey]) {
    for key in keys {
        if let Err(e) = store.marker_release(key).await {
            tracing::warn!(error = %e, "idempotency marker not released");
        }
    }
}

/// The default gathered write (see the module docs): claims, inserts and
/// answers each in a transaction of their own.
pub(crate) async fn write_in_steps<'a, S: Store + ?Sized>(
    store: &'a S,
    claims: &[Option<MarkerClaim>],
    prepared: Vec<Result<NewItem>>,
    retention: std::time::Duration,
    stale_after: std::time::Duration,
) -> Result<Box<dyn Gathered + 'a>> {
    let present: Vec<MarkerClaim> = claims.iter().flatten().cloned().collect();
    let begun = if present.is_empty() {
        Vec::new()
    } else {
        store
            .marker_begin_many(&present, retention, stale_after)
            .await?
    };
    let plan = ClaimedPlan::new(claims, prepared, begun);
    let written = if plan.items.is_empty() {
        Vec::new()
    } else {
        match store.item_insert_each(&plan.items).await {
            Ok(written) => written,
            Err(e) => {
                // Nothing was written: the claims are given up so a retry
                // runs again.
                let keys: Vec<MarkerKey> = plan.started_keys().cloned().collect();
                release_unanswered(store, &keys).await;
                return Err(e);
            }
        }
    };
    Ok(Box::new(InSteps {
        store,
        written: plan.finish(written),
    }))
}

/// The default write between its insert and its answers.
struct InSteps<'a, S: ?Sized> {
    store: &'a S,
    written: Written,
}

#[async_trait]
impl<S: Store + ?Sized> Gathered for InSteps<'_, S> {
    fn outcomes(&self) -> &[Claimed] {
        &self.written.outcomes
    }

    async fn commit(self: Box<Self>, answers: &[Option<Answer>]) -> Result<Vec<Claimed>> {
        let (store, release) = self.written.answers(answers);
        if !store.is_empty() {
            self.store.marker_finish_many(&store).await?;
        }
        release_unanswered(self.store, &release).await;
        Ok(self.written.outcomes)
    }
}
