//! Item validation and payload decoding on arbitrary bytes: never panics.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = drover::item::validate_kind(&text);
    let _ = drover::item::validate_lane(&text);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let item = drover::NewItem::new("fuzz.kind", v);
        let _ = drover::Queue::memory().prepare(&drover::queue::Principal::system(), item);
    }
});
