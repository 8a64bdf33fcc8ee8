//! The ACLI interpreter: lines (one per input line) run through one session against the
//! embedded default configuration. Nothing may panic, and the configuration being edited is
//! valid after every line: `done` commits only what validates, and nothing else changes it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sbc_config::acli::Session;
use sbc_config::Config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut session = Session::new();
    let mut editing = Config::embedded_default();
    for line in text.lines().take(64) {
        let _ = session.execute(line, &mut editing);
        let _ = session.prompt("sbc");
        let _ = session.complete(line, &editing);
        if let Err(e) = editing.validate() {
            panic!("after {line:?} the edited configuration is invalid: {e}");
        }
    }
});
