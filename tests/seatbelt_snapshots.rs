#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Snapshot of the full Seatbelt profile + parameters for a matrix of
//! policies (read-only / workspace-write × network × extra roots ×
//! deny-read present / missing). Review changes with `cargo insta review`.

mod seatbelt_fixtures;

use codewhale::host::seatbelt::{explain_with, profile_with};
use seatbelt_fixtures::{host, matrix, resolved};

#[test]
fn profile_matrix_snapshots() {
    for cell in matrix() {
        let p = profile_with(&resolved(cell), &host()).expect("plan");
        let mut s = String::new();
        for param in &p.params {
            s.push_str(&format!(
                "-D{}={}    ; {}\n",
                param.name, param.value, param.why
            ));
        }
        s.push_str("---- profile ----\n");
        s.push_str(&p.text);
        s.push_str("---- notes ----\n");
        for n in &p.notes {
            s.push_str(n);
            s.push('\n');
        }
        insta::assert_snapshot!(cell.name(), s);
    }
}

#[test]
fn explain_json_snapshot() {
    let cell = matrix()[0];
    let mut e = explain_with(&resolved(cell), &host());
    // Where the test runs is not part of the plan.
    e.runnable_here = false;
    e.notes
        .retain(|n| !n.starts_with("Seatbelt exists only on macOS"));
    insta::assert_json_snapshot!("explain_read-only_json", e);
}
