//! What the CLI test files share: one invocation's result, and a fresh
//! PostgreSQL database per test (`pg`).

// Declared once at the binary's root, so it no longer inherits the allows
// of the files that use it: tests state their expectations by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Output;

use serde_json::Value;

pub mod clients;
pub mod pg;

/// What one CLI invocation did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success: {self:?}");
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

pub fn from_output(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}
