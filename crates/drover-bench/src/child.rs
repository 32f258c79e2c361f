//! Child-process mode: a worker over an existing bench schema that reports
//! every execution on its stdout (`x <id> <at_ns> <lat_ns|->`, one line
//! each, flushed every few milliseconds) and shuts down drain-first when
//! its stdin closes. `drover bench --child-schema S --capacity N` runs it.

use std::time::Duration;

use drover::Worker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::BenchError;
use crate::recorder::{BenchHandler, Recorder, format_line};

// The line format lives with `Exec` in the recorder, so the fleet that reads
// these lines does not depend on the child mode that writes them; the path
// `child::parse_line` stays for callers who found it here.
pub use crate::recorder::parse_line;

/// How often a child writes its new executions.
pub const FLUSH_EVERY: Duration = Duration::from_millis(5);

/// Runs a child worker over `schema` at `database_url` with `capacity`
/// until stdin closes.
///
/// # Errors
/// Connection, configuration or output errors.
///
/// # Cancel safety
/// Not cancel safe: dropping it abandons in-flight items to the sweep.
pub async fn run(database_url: &str, schema: &str, capacity: usize) -> Result<(), BenchError> {
    run_with(database_url, schema, capacity, Duration::ZERO).await
}

/// [`run`] with handlers that sleep `handler` after recording their entry
/// (the parent's `--handler-ms`, passed on).
///
/// # Errors
/// As [`run`].
///
/// # Cancel safety
/// As [`run`].
pub async fn run_with(
    database_url: &str,
    schema: &str,
    capacity: usize,
    handler: Duration,
) -> Result<(), BenchError> {
    let s = crate::workers::settings(capacity);
    let store = drover::store::connect_with(
        database_url,
        &drover::store::ConnectOptions {
            pool_size: s.pool_size,
            schema: schema.to_owned(),
            db_timeout: s.db_timeout,
            ..drover::store::ConnectOptions::default()
        },
    )
    .await?;
    let recorder = Recorder::forwarding();
    let worker = Worker::builder(drover::Queue::new(store))
        .settings(s)
        .handler(BenchHandler::new(recorder.clone()).with_sleep(handler))
        .build()?
        .start()
        .await?;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buf = [0u8; 64];
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            r = stdin.read(&mut buf) => {
                if matches!(r, Ok(0) | Err(_)) {
                    break;
                }
            }
            _ = tick.tick() => {
                flush(&recorder, &mut stdout).await?;
            }
        }
    }
    worker.shutdown().await;
    flush(&recorder, &mut stdout).await?;
    Ok(())
}

async fn flush(recorder: &Recorder, out: &mut tokio::io::Stdout) -> Result<(), BenchError> {
    let new = recorder.take();
    if new.is_empty() {
        return Ok(());
    }
    let text: String = new.iter().map(format_line).collect();
    out.write_all(text.as_bytes())
        .await
        .map_err(|e| BenchError::io("writing executions", e))?;
    out.flush()
        .await
        .map_err(|e| BenchError::io("writing executions", e))?;
    Ok(())
}
