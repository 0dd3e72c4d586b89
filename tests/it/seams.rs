#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The test seams ship only in test builds (src/seams.rs).
//!
//! Statically, on every OS: the `test-seams` feature is off by default,
//! no other feature turns it on, only the crate's self dev-dependency
//! does (so only `cargo test` builds have it), every seam variable is
//! named and read in `src/seams.rs` only, and each read there goes through
//! the one function that answers nothing without the feature. Dynamically:
//! this test build has the seams, in the library and in the `codewhale`
//! binary the integration tests run (cargo unified the feature). That a
//! release binary ignores them is checked by `ci/doctor`, which builds one
//! (a second build of the crate is too costly for a unit test).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const SEAM_VARS: &[&str] = &[
    "CODEWHALE_LANDLOCK_MAX_ABI",
    "CODEWHALE_TEST_LANDLOCK_NO_MASK",
    "CODEWHALE_TEST_RESOLVE",
    "CODEWHALE_TEST_TUI_PANIC",
    "CODEWHALE_TEST_SCHEDULER_CRASH",
];

#[test]
fn the_feature_is_turned_on_by_the_test_build_only() {
    let manifest: toml::Value =
        toml::from_str(&fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    let features = manifest["features"].as_table().unwrap();
    assert_eq!(
        features["test-seams"].as_array().map(Vec::len),
        Some(0),
        "test-seams enables nothing else"
    );
    for (name, enables) in features {
        let enables = enables.as_array().unwrap();
        assert!(
            !enables.iter().any(|e| e.as_str() == Some("test-seams")),
            "feature `{name}` must not turn on test-seams"
        );
    }
    let dep = |table: &str| {
        manifest
            .get(table)
            .and_then(|t| t.get("codewhale"))
            .cloned()
    };
    assert!(dep("dependencies").is_none());
    assert!(dep("build-dependencies").is_none());
    let dev = dep("dev-dependencies").expect("the self dev-dependency");
    assert_eq!(dev["path"].as_str(), Some("."));
    assert_eq!(
        dev["features"].as_array().unwrap(),
        &vec![toml::Value::String("test-seams".into())]
    );
    for (key, table) in manifest.as_table().unwrap() {
        if key == "target" {
            for (cfg, t) in table.as_table().unwrap() {
                assert!(
                    t.get("dependencies")
                        .and_then(|d| d.get("codewhale"))
                        .is_none(),
                    "[target.{cfg}] must not depend on codewhale"
                );
            }
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Lines of code (comment lines dropped).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" //").next().unwrap_or(l))
}

#[test]
fn every_seam_is_named_and_read_in_src_seams_only() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let seams = root().join("src/seams.rs");
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        let code: Vec<&str> = code_lines(&text).collect();
        if *f == seams {
            continue;
        }
        for line in &code {
            for var in SEAM_VARS {
                assert!(
                    !line.contains(var),
                    "{}: names the seam {var} outside src/seams.rs: {line}",
                    f.display()
                );
            }
            assert!(
                !line.contains("CODEWHALE_TEST_"),
                "{}: a CODEWHALE_TEST_ variable outside src/seams.rs: {line}",
                f.display()
            );
            assert!(
                !line.contains("feature = \"test-seams\""),
                "{}: only src/seams.rs looks at the feature: {line}",
                f.display()
            );
        }
    }
    // In src/seams.rs the environment is read once, in `read`, which
    // returns nothing without the feature before it reads.
    let text = fs::read_to_string(&seams).unwrap();
    let reads = code_lines(&text)
        .filter(|l| l.contains("std::env::var"))
        .count();
    assert_eq!(reads, 1, "one environment read in src/seams.rs");
    let read_fn = text
        .split("fn read(name: &str) -> Option<String> {")
        .nth(1)
        .expect("fn read");
    let body: String = read_fn
        .split("\n}")
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(
        body.starts_with("if!ENABLED{returnNone;}std::env::var(name).ok()"),
        "{body}"
    );
    assert!(text.contains("pub const ENABLED: bool = cfg!(feature = \"test-seams\");"));
    for var in SEAM_VARS {
        assert!(text.contains(&format!("\"{var}\"")), "{var} is declared");
    }
}

#[test]
fn this_test_build_has_the_seams_in_the_library() {
    const { assert!(codewhale::seams::ENABLED) }
}

#[cfg(target_os = "linux")]
#[test]
fn this_test_build_has_the_seams_in_the_binary() {
    // The binary the integration tests run honours a seam: the Landlock ABI
    // cap shows in the plan `sandbox explain` prints.
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_codewhale"))
        .args(["sandbox", "explain", "--backend", "landlock", "--json"])
        .current_dir(ws.path())
        .env("HOME", home.path())
        .env("CODEWHALE_HOME", home.path().join(".codewhale"))
        .env("CODEWHALE_LANDLOCK_MAX_ABI", "0")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("test seam")
            || text.contains("\"max_abi\": 0")
            || text.contains("\\\"max_abi\\\":0"),
        "the test build's binary ignored CODEWHALE_LANDLOCK_MAX_ABI=0:\n{text}"
    );
}
