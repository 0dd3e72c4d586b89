#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Snapshot of the full Seatbelt profile + parameters for a matrix of
//! policies (read-only / workspace-write × network × extra roots ×
//! deny-read present / missing). Review changes with `cargo insta review`.

mod common;

use codewhale::host::seatbelt::{explain_with, profile_with};
use common::seatbelt::{host, matrix, resolved};

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

#[test]
fn allowlist_allows_only_the_proxy_port() {
    let mut r = resolved(matrix()[0]);
    r.network = false;
    r.egress = Some(codewhale::net::EgressSpec::new(
        vec!["crates.io".into()],
        vec![],
    ));
    let mut h = host();
    h.egress_port = Some(43128);
    let p = profile_with(&r, &h).expect("plan");
    let allow: Vec<&str> = p
        .text
        .lines()
        .filter(|l| l.contains("network"))
        .filter(|l| !l.trim_start().starts_with(';'))
        .collect();
    insta::assert_snapshot!("allowlist_network_rules", allow.join("\n"));
    // Planning without a port: no rule, a note.
    let p = profile_with(&r, &host()).expect("plan");
    assert!(!p.text.contains("network-outbound"));
    assert!(p.notes.iter().any(|n| n.contains("chosen per run")));
}
