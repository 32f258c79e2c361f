//! Item and payload decoding on arbitrary bytes: never panics, limits hold.
#![no_main]

use drover_core::item::{self, DEFAULT_MAX_PAYLOAD_BYTES, Item, MAX_ERROR_BYTES, NewItem, Status};

/// A small limit so that the over-the-limit paths are reached often.
const SMALL_LIMIT: usize = 64;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = item::validate_kind(&text);
    let _ = item::validate_lane(&text);
    let _ = text.parse::<Status>();
    for limit in [SMALL_LIMIT, DEFAULT_MAX_PAYLOAD_BYTES] {
        if let Ok(v) = item::parse_payload(&text, limit) {
            assert!(serde_json::to_string(&v).is_ok_and(|s| s.len() <= limit.max(text.len())));
            assert!(item::validate_payload(&v, limit).is_ok());
        }
    }
    let cut = item::bound_error(&text);
    assert!(cut.len() <= MAX_ERROR_BYTES && text.starts_with(cut.as_str()));
    // A stored item as the API and the CLI print it, and a producer's item.
    let _ = serde_json::from_slice::<Item>(data);
    if let Ok(new) = serde_json::from_slice::<NewItem>(data) {
        let _ = new.validate(DEFAULT_MAX_PAYLOAD_BYTES);
    }
});
