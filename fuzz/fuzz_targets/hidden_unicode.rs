//! Fuzz the hidden-Unicode detector: no panic; positions are in range;
//! the escaped rendering never contains a hidden character.
#![no_main]

use codewhale::authz::unicode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let found = unicode::find_hidden(&text);
    let n = text.chars().count();
    for h in &found {
        assert!(h.position < n);
    }
    let escaped = unicode::escape(&text);
    assert!(unicode::find_hidden(&escaped).is_empty(), "escape left hidden characters");
    assert_eq!(unicode::rejection(&text).is_some(), !found.is_empty());
});
