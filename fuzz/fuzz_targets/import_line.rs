//! The JSON Lines import parser on arbitrary bytes: never panics, and every
//! line it accepts is an item that passes validation on its own.
#![no_main]

use drover_core::item::DEFAULT_MAX_PAYLOAD_BYTES;
use drover_core::jsonl::parse_line;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        // The CLI reads lines as UTF-8 and refuses the rest before parsing;
        // the lossy copy still exercises the parser on the same shape.
        let _ = parse_line(&String::from_utf8_lossy(data), uuid::Uuid::nil());
        return;
    };
    if let Ok(item) = parse_line(text, uuid::Uuid::nil()) {
        assert!(
            item.validate(DEFAULT_MAX_PAYLOAD_BYTES).is_ok(),
            "an accepted line must stay valid"
        );
        assert!(!item.kind.is_empty());
    }
});
