//! The JSON Lines import parser on arbitrary bytes: never panics.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = drover_cli::commands::import::parse_line(&text, uuid::Uuid::nil());
});
