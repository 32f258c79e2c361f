//! `pgbench -N` beside a bench, for the ratio of a drover rate to the rate
//! of one small write transaction at a time on the same server in the same
//! run (`BENCH.md`'s baseline): finding the binary, `pgbench -i` into a
//! scratch schema, the `-N` run, its TPS, the scratch schema dropped. Used
//! by `--http` ([`crate::http`]) and `--depth` ([`crate::depth`]).

use std::path::PathBuf;
use std::time::Duration;

use sqlx::PgPool;

use crate::BenchError;

/// `d` in whole seconds, rounded up (pgbench's `-T`).
pub(crate) fn whole_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The pgbench binary: on `PATH`, else the newest under
/// `/usr/lib/postgresql/*/bin` (where Debian installs it).
fn pgbench_binary() -> Result<PathBuf, BenchError> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("pgbench");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin").join("pgbench"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    // Versions are directory names: the numerically largest is the newest.
    found.sort_by_key(|p| {
        p.ancestors()
            .nth(2)
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().ok_or_else(|| {
        BenchError::io(
            "finding pgbench (PATH, /usr/lib/postgresql/*/bin)",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })
}

/// `pgbench -i -s <scale>` into a scratch schema of the database at `url`
/// (created and dropped through `admin`), then `pgbench -N -c <clients> -j
/// 2 -T <duration>`: the TPS pgbench reports. The scratch schema is
/// dropped whether the run succeeded or not.
///
/// # Errors
/// [`BenchError::Io`] when pgbench is not found or cannot start;
/// [`BenchError::Http`] (the crate's error for a failing outside tool)
/// when it fails or prints no TPS; database errors.
pub(crate) async fn tps(
    admin: &PgPool,
    url: &str,
    clients: usize,
    duration: Duration,
    scale: u32,
) -> Result<f64, BenchError> {
    let bin = pgbench_binary()?;
    let schema = format!(
        "drover_pgbench_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(admin)
        .await?;
    let out = pgbench_in(&bin, url, &schema, clients, duration, scale).await;
    let dropped = sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(admin)
        .await;
    let tps = out?;
    dropped?;
    Ok(tps)
}

async fn pgbench_in(
    bin: &std::path::Path,
    url: &str,
    schema: &str,
    clients: usize,
    duration: Duration,
    scale: u32,
) -> Result<f64, BenchError> {
    // PGOPTIONS puts pgbench's tables in the scratch schema, for both the
    // initialisation and the run.
    let options = format!("-c search_path={schema}");
    let init = tokio::process::Command::new(bin)
        .args(["-i", "-q", "-s", &scale.to_string(), url])
        .env("PGOPTIONS", &options)
        .output()
        .await
        .map_err(|e| BenchError::io("running pgbench -i", e))?;
    if !init.status.success() {
        return Err(BenchError::Http(format!(
            "pgbench -i failed: {}",
            String::from_utf8_lossy(&init.stderr).trim()
        )));
    }
    let run = tokio::process::Command::new(bin)
        .args([
            "-N",
            "-c",
            &clients.to_string(),
            "-j",
            "2",
            "-T",
            &whole_secs(duration).to_string(),
            url,
        ])
        .env("PGOPTIONS", &options)
        .output()
        .await
        .map_err(|e| BenchError::io("running pgbench -N", e))?;
    let stdout = String::from_utf8_lossy(&run.stdout);
    if !run.status.success() {
        return Err(BenchError::Http(format!(
            "pgbench -N failed: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        )));
    }
    parse_tps(&stdout)
        .ok_or_else(|| BenchError::Http(format!("no TPS in pgbench's output: {stdout}")))
}

/// The TPS of pgbench's report (`tps = 4620.123 (without initial
/// connection time)`).
fn parse_tps(out: &str) -> Option<f64> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("tps = "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tps_is_read_from_pgbench_output() {
        let out = "number of failed transactions: 0 (0.000%)\nlatency average = 4.3 ms\ninitial connection time = 12.1 ms\ntps = 4620.123456 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(4620.123456));
        assert_eq!(parse_tps("nothing"), None);
    }

    #[test]
    fn durations_round_up_to_whole_seconds() {
        assert_eq!(whole_secs(Duration::from_millis(1500)), 2);
        assert_eq!(whole_secs(Duration::from_secs(20)), 20);
    }
}
