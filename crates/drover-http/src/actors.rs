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
    /// `token <first 8 hex digits>`.
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

/// The first 8 hex digits of `id`: enough to tell ids apart on one page.
pub fn short_id(id: Uuid) -> String {
    let mut s = id.simple().to_string();
    s.truncate(8);
    s
}
