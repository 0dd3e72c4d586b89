#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The Nix build's test skip switch skips exactly what it names.
//!
//! Inside the Nix build sandbox no test can create namespaces or nest
//! `sandbox-exec`, so the flake builds the tests with the cargo feature
//! `nix-build-sandbox`, and every `tests/real_*.rs` target compiles to nothing
//! under it. That switch is the ONLY way a test is skipped: everywhere else a
//! real-sandbox test that cannot run must fail loudly. This file proves the
//! switch is narrow, statically, on every OS:
//!
//! 1. `Cargo.toml` declares `nix-build-sandbox = []`, off by default, enabled
//!    by no other feature;
//! 2. every `real_*` test target starts with exactly
//!    `#![cfg(not(feature = "nix-build-sandbox"))]` and names the feature
//!    nowhere else;
//! 3. no other Rust source (src/, other tests, benches, examples, build.rs)
//!    names the feature, in a `cfg` or as `CARGO_FEATURE_…`;
//! 4. no Rust source skips on a Nix environment variable instead.
//!
//! The dynamic half — listing every test binary with and without the feature
//! and checking that only the `real_*` binaries differ (and are empty with
//! it) — lives in `ci/check-flake`, because it needs a second build of every
//! test binary, which is too costly for a unit test.
//!
//! Each checker is also run against small fixtures that violate the rule, so
//! these tests are shown to be able to fail.

use regex::Regex;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

const FEATURE: &str = "nix-build-sandbox";
/// The one attribute a `real_*` target must start with.
const REAL_ATTR: &str = "#![cfg(not(feature = \"nix-build-sandbox\"))]";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Any reference to the feature that could change what compiles or runs.
static FEATURE_REF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"feature\s*=\s*"nix-build-sandbox"|CARGO_FEATURE_NIX_BUILD_SANDBOX"#)
        .expect("valid regex")
});

/// Environment variables a test might (wrongly) use to detect a Nix build.
static NIX_ENV_REF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(NIX_BUILD_TOP|IN_NIX_SHELL|NIX_BUILD_CORES)\b").expect("valid regex")
});

/// A cargo test target: its name and its crate-root file.
#[derive(Debug)]
struct TestTarget {
    name: String,
    root: PathBuf,
}

/// Test targets as cargo discovers them: `tests/*.rs`, `tests/*/main.rs`
/// (unless `autotests = false`), plus explicit `[[test]]` entries.
fn test_targets(manifest: &toml::Value, dir: &Path) -> Vec<TestTarget> {
    let mut out = Vec::new();
    let auto = manifest
        .get("package")
        .and_then(|p| p.get("autotests"))
        .and_then(toml::Value::as_bool)
        .unwrap_or(true);
    let tests_dir = dir.join("tests");
    if auto && tests_dir.is_dir() {
        let entries = fs::read_dir(&tests_dir).expect("read tests/");
        for entry in entries {
            let path = entry.expect("tests/ entry").path();
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
                out.push(TestTarget {
                    name: stem,
                    root: path,
                });
            } else if path.join("main.rs").is_file() {
                out.push(TestTarget {
                    name: stem,
                    root: path.join("main.rs"),
                });
            }
        }
    }
    if let Some(explicit) = manifest.get("test").and_then(toml::Value::as_array) {
        for t in explicit {
            let name = t.get("name").and_then(toml::Value::as_str).unwrap_or("");
            let path = t
                .get("path")
                .and_then(toml::Value::as_str)
                .map(|p| dir.join(p))
                .unwrap_or_else(|| tests_dir.join(format!("{name}.rs")));
            out.retain(|x| x.root != path);
            out.push(TestTarget {
                name: name.to_string(),
                root: path,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Problems with one `real_*` target's root file, empty when it is right:
/// the first line that is not blank or a `//` comment must be [`REAL_ATTR`],
/// and the feature must be named exactly once.
fn check_real_target(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//"));
    if first != Some(REAL_ATTR) {
        problems.push(format!(
            "must start with `{REAL_ATTR}` (only blank and `//` comment lines may come before it); first line is `{}`",
            first.unwrap_or("<empty file>")
        ));
    }
    let refs = FEATURE_REF.find_iter(text).count();
    if refs != 1 {
        problems.push(format!(
            "names the `{FEATURE}` feature {refs} times; it must appear once, in the leading attribute"
        ));
    }
    problems
}

/// Problems with a Rust file that is not a `real_*` target root: it must
/// not name the feature nor detect a Nix build from the environment.
fn check_other_source(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(m) = FEATURE_REF.find(line) {
            problems.push(format!(
                "line {}: `{}`: only tests/real_*.rs may use the `{FEATURE}` feature",
                i + 1,
                m.as_str()
            ));
        }
        if let Some(m) = NIX_ENV_REF.find(line) {
            problems.push(format!(
                "line {}: `{}`: tests must not detect a Nix build from the environment; the `{FEATURE}` feature is the only skip switch",
                i + 1,
                m.as_str()
            ));
        }
    }
    problems
}

/// Problems with the feature's declaration in `Cargo.toml`.
fn check_manifest(manifest: &toml::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(features) = manifest.get("features").and_then(toml::Value::as_table) else {
        return vec!["Cargo.toml: no [features] table".into()];
    };
    match features.get(FEATURE).and_then(toml::Value::as_array) {
        None => problems.push(format!("Cargo.toml: [features] {FEATURE} is not declared")),
        Some(list) if !list.is_empty() => problems.push(format!(
            "Cargo.toml: [features] {FEATURE} must enable nothing else, found {list:?}"
        )),
        Some(_) => {}
    }
    for (name, enabled) in features {
        let names_it = enabled
            .as_array()
            .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(FEATURE)));
        if names_it {
            problems.push(format!(
                "Cargo.toml: [features] {name} enables {FEATURE}; only the Nix build may turn it on"
            ));
        }
    }
    problems
}

/// All Rust files cargo could compile into this package (not `target/`).
fn rust_sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["src", "tests", "benches", "examples"] {
        for entry in walkdir::WalkDir::new(dir.join(sub)).into_iter().flatten() {
            if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "rs") {
                out.push(entry.into_path());
            }
        }
    }
    let build_rs = dir.join("build.rs");
    if build_rs.is_file() {
        out.push(build_rs);
    }
    out.sort();
    out
}

fn manifest() -> toml::Value {
    let path = root().join("Cargo.toml");
    let text = fs::read_to_string(&path).expect("read Cargo.toml");
    toml::from_str(&text).expect("parse Cargo.toml")
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn manifest_declares_an_inert_feature_off_by_default() {
    let problems = check_manifest(&manifest());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_real_target_carries_exactly_the_switch() {
    let mut problems = Vec::new();
    for t in test_targets(&manifest(), &root()) {
        if t.name.starts_with("real_") {
            let text = fs::read_to_string(&t.root).expect("read real_ target");
            for p in check_real_target(&text) {
                problems.push(format!("{}: {p}", rel(&t.root)));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn nothing_else_names_the_switch_or_sniffs_nix() {
    let dir = root();
    let real_roots: Vec<PathBuf> = test_targets(&manifest(), &dir)
        .into_iter()
        .filter(|t| t.name.starts_with("real_"))
        .map(|t| t.root)
        .collect();
    let this_file = dir.join("tests").join("it").join("skip_switch.rs");
    let sources = rust_sources(&dir);
    assert!(
        sources.contains(&this_file) && sources.iter().any(|p| p.starts_with(dir.join("src"))),
        "source walk found neither src/ nor this file under {}: the check would be vacuous",
        dir.display()
    );
    let mut problems = Vec::new();
    for path in sources {
        if path == this_file || real_roots.contains(&path) {
            continue;
        }
        let text = fs::read_to_string(&path).expect("read source");
        for p in check_other_source(&text) {
            problems.push(format!("{}: {p}", rel(&path)));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- the checkers catch what they claim to catch (negative fixtures) ----

#[test]
fn real_target_checker_accepts_the_exact_form() {
    let ok = format!("//! Real bwrap tests.\n\n{REAL_ATTR}\n#![cfg(target_os = \"linux\")]\n\n#[test]\nfn t() {{}}\n");
    assert_eq!(check_real_target(&ok), Vec::<String>::new());
}

#[test]
fn real_target_checker_rejects_missing_late_or_combined_switch() {
    let missing = "#[test]\nfn t() {}\n";
    assert_eq!(check_real_target(missing).len(), 2, "no attribute at all");
    let late = format!("use std::fs;\n{REAL_ATTR}\n");
    assert_eq!(check_real_target(&late).len(), 1, "attribute after an item");
    let combined = "#![cfg(all(target_os = \"linux\", not(feature = \"nix-build-sandbox\")))]\n";
    assert_eq!(check_real_target(combined).len(), 1, "combined cfg");
    let twice = format!("{REAL_ATTR}\n#[cfg_attr(feature = \"nix-build-sandbox\", ignore)]\n");
    assert_eq!(check_real_target(&twice).len(), 1, "a second use");
}

#[test]
fn other_source_checker_rejects_feature_use_and_env_sniffing() {
    assert!(check_other_source("fn f() {}\n// see the Nix build notes\n").is_empty());
    let cfg = "#[cfg_attr(feature = \"nix-build-sandbox\", ignore)]\nfn t() {}\n";
    assert_eq!(check_other_source(cfg).len(), 1);
    let build_rs = "if std::env::var_os(\"CARGO_FEATURE_NIX_BUILD_SANDBOX\").is_some() {}";
    assert_eq!(check_other_source(build_rs).len(), 1);
    let sniff = "if std::env::var(\"NIX_BUILD_TOP\").is_ok() { return; }";
    assert_eq!(check_other_source(sniff).len(), 1);
}

#[test]
fn manifest_checker_rejects_default_on_or_transitive_feature() {
    let ok: toml::Value =
        toml::from_str("[features]\ndefault = []\nnix-build-sandbox = []\n").expect("fixture");
    assert!(check_manifest(&ok).is_empty());
    let default_on: toml::Value =
        toml::from_str("[features]\ndefault = [\"nix-build-sandbox\"]\nnix-build-sandbox = []\n")
            .expect("fixture");
    assert_eq!(check_manifest(&default_on).len(), 1);
    let enables: toml::Value =
        toml::from_str("[features]\nnix-build-sandbox = [\"dep:which\"]\n").expect("fixture");
    assert_eq!(check_manifest(&enables).len(), 1);
    let absent: toml::Value = toml::from_str("[features]\ndefault = []\n").expect("fixture");
    assert_eq!(check_manifest(&absent).len(), 1);
}

#[test]
fn target_discovery_follows_cargo_rules() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tests = tmp.path().join("tests");
    fs::create_dir_all(tests.join("real_dir")).expect("mkdir");
    fs::create_dir_all(tests.join("common")).expect("mkdir");
    fs::write(tests.join("real_a.rs"), "").expect("write");
    fs::write(tests.join("plain.rs"), "").expect("write");
    fs::write(tests.join("real_dir").join("main.rs"), "").expect("write");
    fs::write(tests.join("common").join("mod.rs"), "").expect("write");
    let m: toml::Value = toml::from_str(
        "[package]\nname = \"x\"\n[[test]]\nname = \"real_custom\"\npath = \"it/x.rs\"\n",
    )
    .expect("fixture");
    let names: Vec<String> = test_targets(&m, tmp.path())
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["plain", "real_a", "real_custom", "real_dir"]);
    let no_auto: toml::Value =
        toml::from_str("[package]\nname = \"x\"\nautotests = false\n").expect("fixture");
    assert!(test_targets(&no_auto, tmp.path()).is_empty());
}
