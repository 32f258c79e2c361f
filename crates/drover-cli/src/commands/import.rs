//! `drover enqueue --from-file PATH|-`: bulk enqueue from JSON Lines.
//!
//! Each non-blank line is one item object with the fields of DESIGN §1:
//! `kind` is required; `lane`, `payload`, `priority`, `available_at`,
//! `max_attempts`, `idempotency_key`, `id`, `tenant_id`, `request_id` and
//! `traceparent` are optional; any other field (status, attempts, claim
//! fields, timestamps) is ignored because the store stamps it.
//!
//! The whole input is validated first; only if every line passes is
//! anything written, in batches of [`BATCH_SIZE`] through
//! `Queue::enqueue_many`. A file is read twice (so 100k lines need no
//! memory); stdin is read once and held in memory.

use std::io::{BufRead, BufReader};
use std::time::Instant;

use drover::jsonl::parse_line;
use drover::queue::Principal;
use drover::{Error, InsertResult, NewItem, Queue};
use serde::Serialize;
use uuid::Uuid;

use crate::{CliError, Context};

/// Items per `enqueue_many` call (one statement each).
pub const BATCH_SIZE: usize = 1000;
/// Inputs with at least this many lines show a progress bar on stderr
/// (when stderr is a terminal).
pub const PROGRESS_THRESHOLD: usize = 10_000;

/// What an import did.
#[derive(Debug, Default, Serialize)]
struct Summary {
    lines: usize,
    inserted: usize,
    id_exists: usize,
    key_exists: usize,
    seconds: f64,
    items_per_second: f64,
}

pub(crate) async fn run(
    path: &str,
    tenant: Uuid,
    json: bool,
    cx: &mut Context<'_>,
) -> Result<(), CliError> {
    let started = Instant::now();
    let summary = if path == "-" {
        // Pass one over stdin keeps the items: stdin cannot be read twice.
        let mut items = Vec::new();
        each_item(
            BufReader::new(std::io::stdin().lock()),
            tenant,
            |_, item| {
                items.push(item);
                Ok(())
            },
        )?;
        let queue = cx.queue().await?;
        let total = items.len();
        let mut summary = Summary::default();
        let bar = progress(total);
        let mut rest = items.into_iter().peekable();
        while rest.peek().is_some() {
            let batch: Vec<NewItem> = rest.by_ref().take(BATCH_SIZE).collect();
            write_batch(&queue, batch, &mut summary).await?;
            bar.set_position(summary.lines as u64);
        }
        bar.finish_and_clear();
        summary
    } else {
        // Pass one validates every line and counts; nothing is kept.
        let mut total = 0usize;
        each_item(open(path)?, tenant, |_, _| {
            total += 1;
            Ok(())
        })?;
        let queue = cx.queue().await?;
        write_file(&queue, path, tenant, total).await?
    };
    let mut summary = summary;
    summary.seconds = started.elapsed().as_secs_f64();
    summary.items_per_second = if summary.seconds > 0.0 {
        summary.lines as f64 / summary.seconds
    } else {
        0.0
    };
    if json {
        let v = serde_json::to_string(&summary).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        writeln!(
            cx.out,
            "inserted {}, id collisions {}, key collisions {} ({} items in {:.2} s, {:.0} items/s)",
            summary.inserted,
            summary.id_exists,
            summary.key_exists,
            summary.lines,
            summary.seconds,
            summary.items_per_second
        )?;
    }
    Ok(())
}

fn open(path: &str) -> Result<BufReader<std::fs::File>, CliError> {
    std::fs::File::open(path)
        .map(BufReader::new)
        .map_err(|e| CliError::io(format!("cannot open {path}"), e))
}

/// Pass two over a file: parse again and write batch by batch.
async fn write_file(
    queue: &Queue,
    path: &str,
    tenant: Uuid,
    total: usize,
) -> Result<Summary, CliError> {
    let mut summary = Summary::default();
    let bar = progress(total);
    let mut batch = Vec::with_capacity(BATCH_SIZE);
    let mut lines = open(path)?.lines();
    let mut line_no = 0usize;
    loop {
        let next = lines.next();
        let done = next.is_none();
        if let Some(line) = next {
            line_no += 1;
            let text = line.map_err(|e| read_error(line_no, e))?;
            if text.trim().is_empty() {
                continue;
            }
            let item = parse_line(&text, tenant).map_err(|error| CliError::AtLine {
                line: line_no,
                error: Error::invalid(
                    "input",
                    format!(
                        "changed after validation ({error}); the batches before it were written"
                    ),
                ),
            })?;
            batch.push(item);
        }
        if batch.len() >= BATCH_SIZE || (done && !batch.is_empty()) {
            write_batch(queue, std::mem::take(&mut batch), &mut summary).await?;
            bar.set_position(summary.lines as u64);
        }
        if done {
            break;
        }
    }
    bar.finish_and_clear();
    Ok(summary)
}

async fn write_batch(
    queue: &Queue,
    batch: Vec<NewItem>,
    summary: &mut Summary,
) -> Result<(), CliError> {
    let results = queue.enqueue_many(&Principal::system(), batch).await?;
    for r in results {
        summary.lines += 1;
        match r {
            InsertResult::Inserted => summary.inserted += 1,
            // An id held by another tenant is an id collision too; which
            // tenant holds it is not this tenant's to know.
            InsertResult::IdExists | InsertResult::IdTaken => summary.id_exists += 1,
            InsertResult::KeyExists => summary.key_exists += 1,
        }
    }
    Ok(())
}

fn progress(total: usize) -> indicatif::ProgressBar {
    if total < PROGRESS_THRESHOLD {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let style = indicatif::ProgressStyle::with_template(
        "{bar:40} {pos}/{len} items ({per_sec}, {eta} left)",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn read_error(line: usize, e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::InvalidData {
        CliError::AtLine {
            line,
            error: Error::invalid("input", "is not UTF-8 text"),
        }
    } else {
        CliError::io(format!("reading line {line}"), e)
    }
}

/// Parses and checks every non-blank line, calling `f` with each item;
/// stops at the first bad line, naming it and the field.
fn each_item(
    reader: impl BufRead,
    tenant: Uuid,
    mut f: impl FnMut(usize, NewItem) -> Result<(), CliError>,
) -> Result<(), CliError> {
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let text = line.map_err(|e| read_error(line_no, e))?;
        if text.trim().is_empty() {
            continue;
        }
        let item = parse_line(&text, tenant).map_err(|error| CliError::AtLine {
            line: line_no,
            error,
        })?;
        f(line_no, item)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn validation_stops_at_the_first_bad_line() {
        let input = "{\"kind\":\"a\"}\n\n{\"kind\":\"b\",\"lane\":\"no way\"}\n{\"kind\":\"c\"}\n";
        let mut seen = 0;
        let e = each_item(input.as_bytes(), Uuid::nil(), |_, _| {
            seen += 1;
            Ok(())
        })
        .expect_err("bad line 3");
        assert_eq!(seen, 1);
        assert!(e.to_string().starts_with("line 3: invalid lane:"), "{e}");
        assert_eq!(e.exit_code(), crate::EXIT_INVALID);
    }
}
