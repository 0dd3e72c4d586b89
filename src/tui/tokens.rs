//! Token counts as the UI writes them (a leaf: the footer and the
//! state's notices both use it).

/// `1.2k` from 1234; below a thousand, the number.
pub fn human(n: u64) -> String {
    if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}
