//! Processes on this machine, read from `/proc` (the tests that check no
//! process of a killed job is left).
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Pids whose command line contains `marker` (this test's unique word).
pub fn with_marker(marker: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(marker)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Wait up to `within` for no process with `marker` to be left; the ones
/// still there.
pub fn gone_within(marker: &str, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let left = with_marker(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait up to `within` for a process with `marker` to run.
pub fn running_within(marker: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !with_marker(marker).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
