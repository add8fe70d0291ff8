#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| copyless_fuzz::wsd::run(data));
