//! Actors as people read them: the label of the token that acted, or
//! `system` for the nil actor (the queue's own writes), instead of a UUID.
//!
//! Invariant: a label is looked up, never trusted from the request; an
//! actor no stored token carries (a token configured in code, a token
//! since deleted) is shown by its short id, so nothing is hidden.

use std::collections::HashMap;

use drover::Queue;
use uuid::Uuid;

/// The token labels by token id, read once per page or answer.
#[derive(Debug, Default, Clone)]
pub struct Actors {
    labels: HashMap<Uuid, String>,
}

impl Actors {
    /// The stored tokens' labels. A store that cannot list them answers
    /// with none (every actor then shows by its short id): a label is a
    /// courtesy, never worth failing the page for.
    pub async fn load(queue: &Queue) -> Actors {
        match queue.token_list().await {
            Ok(rows) => Actors {
                labels: rows
                    .into_iter()
                    .filter(|t| !t.label.is_empty())
                    .map(|t| (t.id, t.label))
                    .collect(),
            },
            Err(e) => {
                tracing::debug!(error = %e, "token labels not read");
                Actors::default()
            }
        }
    }

    /// `actor` in words: `system` for the nil UUID, the token's label, else
    /// `token <last 8 hex digits>`.
    pub fn name(&self, actor: Uuid) -> String {
        if actor.is_nil() {
            return "system".into();
        }
        match self.labels.get(&actor) {
            Some(l) => l.clone(),
            None => format!("token {}", short_id(actor)),
        }
    }
}

/// The last 8 hex digits of `id`: enough to tell ids apart on one page.
/// The last, not the first: drover's ids are time-ordered (UUIDv7), so
/// ids made within the same minute share their leading digits, while the
/// tail is random.
pub fn short_id(id: Uuid) -> String {
    let s = id.simple().to_string();
    s[s.len() - 8..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids made in the same minute (time-ordered UUIDv7, as drover makes
    /// them) share their leading digits: a short id must come from the
    /// random tail, or a page of them reads as one id repeated.
    #[test]
    fn short_ids_of_ids_made_together_differ() {
        let ms = 1_765_000_000_000;
        let a = uuid::Builder::from_unix_timestamp_millis(ms, &[0x11; 10]).into_uuid();
        let b = uuid::Builder::from_unix_timestamp_millis(ms + 1, &[0x22; 10]).into_uuid();
        assert_ne!(short_id(a), short_id(b));
        assert_eq!(short_id(a).len(), 8);
        assert!(a.simple().to_string().ends_with(&short_id(a)));
        assert_eq!(short_id(Uuid::nil()), "00000000");
    }
}
