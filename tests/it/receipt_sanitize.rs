#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Table tests for what a receipt shows of recorded text: secrets masked,
//! control and bidi characters escaped, then clipped — in that order.

use codewhale::receipt::sanitize::{
    clip, escape_controls, first_line, mask_secrets, COMMAND_LIMIT, ERROR_LIMIT, QUERY_LIMIT,
};

#[test]
fn masking_table() {
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----";
    let cases: &[(&str, &str)] = &[
        // key=value for key-like names, quoted or not, any case.
        ("API_KEY=abc123 make", "API_KEY=*** make"),
        (
            "export GITHUB_TOKEN=\"q w e\"; ls",
            "export GITHUB_TOKEN=***; ls",
        ),
        ("db_password='hunter2' x", "db_password=*** x"),
        ("client_secret: s3cr3t", "client_secret: ***"),
        (
            "curl --api-key=zzz https://h",
            "curl --api-key=*** https://h",
        ),
        ("tool --password hunter2 --v", "tool --password *** --v"),
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
            "AWS_SECRET_ACCESS_KEY=***",
        ),
        // Bearer tokens.
        (
            "curl -H 'Authorization: Bearer abc.def-ghi' h",
            "curl -H 'Authorization: Bearer ***' h",
        ),
        ("bearer tok123", "bearer ***"),
        (
            "Authorization: Basic dXNlcjpwYXNz",
            "Authorization: Basic ***",
        ),
        // Token shapes.
        ("echo sk-proj-AbCdEf0123456789xyz", "echo sk-***"),
        ("echo sk-ant-api03-AAAAAAAAAAAA", "echo sk-***"),
        ("ghp_0123456789abcdefABCDEF0123 here", "ghp_*** here"),
        ("github_pat_11ABCDEFG0123456789_abcdef", "github_pat_***"),
        ("AKIAIOSFODNN7EXAMPLE", "AKIA***"),
        ("xoxb-1234-5678-abcdEFGH", "xoxb-***"),
        // PEM blocks, whole, and a BEGIN whose END is missing.
        (pem, "[PEM block masked]"),
        (
            "x -----BEGIN RSA PRIVATE KEY-----\nMIIE",
            "x [PEM block masked]",
        ),
        // Not secrets: left alone.
        ("cat secret.txt", "cat secret.txt"),
        ("cargo test -p parser", "cargo test -p parser"),
        ("ask-me-later", "ask-me-later"),
        ("sk-short", "sk-short"),
    ];
    for (input, want) in cases {
        assert_eq!(&mask_secrets(input), want, "input: {input:?}");
    }
}

#[test]
fn escaping_table() {
    let cases: &[(&str, &str)] = &[
        ("a\nb", "a\\nb"),
        ("tab\there", "tab\\there"),
        ("bell\u{7}", "bell\\u{0007}"),
        ("esc\u{1b}[31mred", "esc\\u{001b}[31mred"),
        // Trojan Source: right-to-left override and isolates.
        ("admin\u{202E}txt.exe", "admin\\u{202e}txt.exe"),
        ("a\u{2066}b\u{2069}", "a\\u{2066}b\\u{2069}"),
        ("\u{200F}x", "\\u{200f}x"),
        ("plain ünïcode ✓", "plain ünïcode ✓"),
    ];
    for (input, want) in cases {
        assert_eq!(&escape_controls(input), want, "input: {input:?}");
    }
}

#[test]
fn truncation_table() {
    let long = "x".repeat(300);
    let cases: Vec<(String, usize, String)> = vec![
        ("short".into(), COMMAND_LIMIT, "short".into()),
        (long.clone(), COMMAND_LIMIT, format!("{}…", "x".repeat(199))),
        (long.clone(), QUERY_LIMIT, format!("{}…", "x".repeat(119))),
        (long.clone(), ERROR_LIMIT, format!("{}…", "x".repeat(159))),
        ("x".repeat(200), COMMAND_LIMIT, "x".repeat(200)),
        // An escape is never split: it is dropped whole at the cut.
        (format!("{}\u{202E}tail", "a".repeat(5)), 8, "aaaaa…".into()),
        ("ab\ncd".into(), 5, "ab\\n…".into()),
    ];
    for (input, limit, want) in cases {
        let got = clip(&input, limit);
        assert_eq!(got, want, "input: {input:?} limit {limit}");
        assert!(got.chars().count() <= limit);
    }
}

/// Masking happens before the cut: a secret that straddles the limit is
/// masked, never shown in part.
#[test]
fn mask_first_then_cut() {
    let token = format!("ghp_{}", "A1b2C3d4".repeat(5));
    let input = format!("{} {token}", "y".repeat(180));
    // Cut first, then mask, would show `ghp_A1b2C3d4A1b` (too short to
    // match the token pattern any more).
    let cut_first = mask_secrets(&input.chars().take(199).collect::<String>());
    assert!(cut_first.contains("ghp_A1b2"), "{cut_first}");
    let got = clip(&input, COMMAND_LIMIT);
    assert!(!got.contains("A1b2"), "{got}");
    assert!(got.ends_with("ghp_***"), "{got}");

    let kv = format!("{} API_KEY={}", "z".repeat(190), "s".repeat(40));
    let got = clip(&kv, COMMAND_LIMIT);
    assert!(!got.contains("sss"), "{got}");
    let pem = format!(
        "{}-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
        "p".repeat(150)
    );
    let got = clip(&pem, ERROR_LIMIT);
    assert!(!got.contains("MIIE"), "{got}");
    assert!(got.chars().count() <= ERROR_LIMIT);
}

#[test]
fn first_line_marks_more_lines() {
    assert_eq!(first_line("fix it\nand more", 80), "fix it…");
    assert_eq!(first_line("\n\n  only  \n", 80), "only");
    assert_eq!(first_line("TOKEN=abc\nx", 80), "TOKEN=***…");
}
