//! Sizes: reduced for `cargo test --workspace`, full with
//! `DROVER_FAULT_FULL=1`.

/// True when `DROVER_FAULT_FULL` is set to anything but `0` or empty.
pub fn full() -> bool {
    std::env::var("DROVER_FAULT_FULL").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `reduced` normally, `full` under `DROVER_FAULT_FULL=1`.
pub fn pick<T>(reduced: T, full_size: T) -> T {
    if full() { full_size } else { reduced }
}
