//! Progress on stderr while a bench runs: one bar per phase and one-line
//! notes. Hidden entirely when turned off (tests, `--quiet`) and drawn only
//! when stderr is a terminal (indicatif's rule), so logs stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where a bench reports what it is doing.
#[derive(Debug, Clone)]
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Progress on stderr when `enabled`, nothing otherwise.
    pub fn new(enabled: bool) -> Self {
        Progress { enabled }
    }

    /// No progress at all.
    pub fn hidden() -> Self {
        Progress { enabled: false }
    }

    /// Prints one note line on stderr.
    pub fn note(&self, msg: &str) {
        if self.enabled {
            eprintln!("bench: {msg}");
        }
    }

    /// A bar of `len` steps labelled `what`.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_owned());
        bar
    }
}
