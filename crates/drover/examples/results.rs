//! Work that waits for work, the item's own half, in one program: a kind
//! that declares its result type, a handler that reports progress and
//! checkpoints as it goes and returns a typed result, a producer that
//! enqueues with a key unique only while the item is active and waits for
//! the result. `cargo test` builds it; run it with
//! `cargo run -p drover --example results [DATABASE_URL]` (default
//! `memory:`).

use std::time::Duration;

use drover::queue::{JobContext, Kind, Queue, Returns};
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize)]
struct CountWords {
    text: String,
}

impl Kind for CountWords {
    const NAME: &'static str = "count_words";
}

#[derive(Debug, Serialize, Deserialize)]
struct WordCount {
    words: usize,
}

// The result type a caller reads back with `Queue::result::<CountWords>`.
impl Returns for CountWords {
    type Output = WordCount;
}

struct Counter;

impl Handler for Counter {
    type Job = CountWords;
    const STRATEGY: Strategy = Strategy {
        idempotency: "pure: counting twice gives the same count",
        retry: "default backoff, 5 attempts",
        checkpoint: "progress note {done, words}: a retry resumes from it",
        recovery: "a crashed run is swept and resumes from its last checkpoint",
    };

    async fn handle(&self, cx: &JobContext, job: CountWords) -> Outcome {
        // Resume from the checkpoint a previous run left, if any.
        let note = cx.progress().and_then(|p| p.data);
        let start = note.as_ref().and_then(|n| n["done"].as_u64()).unwrap_or(0);
        let mut words = note.as_ref().and_then(|n| n["words"].as_u64()).unwrap_or(0);
        let lines: Vec<&str> = job.text.lines().collect();
        let total = lines.len().max(1);
        for (i, line) in lines
            .iter()
            .enumerate()
            .skip(usize::try_from(start).unwrap_or(0))
        {
            words += line.split_whitespace().count() as u64;
            // Cheap to call in a loop: written at most once a second, the
            // last report flushed when the run ends.
            cx.checkpoint(&serde_json::json!({"done": i + 1, "words": words}))
                .await
                .map_err(JobError::retry)?;
            cx.set_progress((i + 1) as f64 * 100.0 / total as f64)
                .await
                .map_err(JobError::retry)?;
        }
        Done::output(&WordCount {
            words: usize::try_from(words).unwrap_or(usize::MAX),
        })
    }
}

#[tokio::main]
async fn main() -> drover::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "memory:".into());
    let queue = Queue::connect(&url).await?;
    queue.migrate().await?;
    let running = Worker::builder(queue.clone())
        .metrics_addr(None)
        .handler(Counter)
        .build()?
        .start()
        .await?;

    let text = "the quick brown fox\njumps over\nthe lazy dog";
    let job = || CountWords { text: text.into() };
    // While one "count:doc-1" waits or runs, enqueueing it again answers
    // that item instead of piling up another.
    let first = queue
        .enqueue(job())
        .key("count:doc-1")
        .unique_while_active()
        .await?;
    let again = queue
        .enqueue(job())
        .key("count:doc-1")
        .unique_while_active()
        .await?;
    tracing::info!(id = %first.item.id, first = ?first.result, again = ?again.result, "enqueued");

    let item = queue
        .wait_final(Uuid::nil(), first.item.id, Duration::from_secs(30))
        .await?;
    let count = queue.result::<CountWords>(Uuid::nil(), item.id).await?;
    tracing::info!(status = %item.status, ?count, progress = ?item.progress, "finished");
    running.shutdown().await;
    match count {
        Some(WordCount { words: 9 }) => Ok(()),
        other => Err(drover::Error::invalid(
            "result",
            format!("expected 9 words, got {other:?}"),
        )),
    }
}
