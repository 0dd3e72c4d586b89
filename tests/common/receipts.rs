//! Helpers for the receipt tests: workspace fingerprints, a user `.git`,
//! schema validation and Markdown normalisation.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `root` (relative path → bytes + mode), recursively.
pub fn tree(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.expect("walk");
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(root).expect("prefix").to_path_buf();
            #[cfg(unix)]
            let mode =
                std::os::unix::fs::PermissionsExt::mode(&e.metadata().expect("meta").permissions());
            #[cfg(not(unix))]
            let mode = 0;
            out.insert(rel, (std::fs::read(e.path()).expect("read"), mode));
        }
    }
    out
}

/// `git init` + one commit in `ws`, with a HOME-independent identity.
pub fn user_repo(ws: &Path, home: &Path) {
    for args in [
        vec!["init", "-q"],
        vec!["add", "-A"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    ] {
        let o = std::process::Command::new("git")
            .args(&args)
            .current_dir(ws)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Validate `v` against `docs/receipt.schema.json`; panics with every error.
pub fn validate(v: &Value) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/receipt.schema.json"
    ))
    .expect("schema file");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "receipt does not match the schema:\n{}\n{v:#}",
        errors.join("\n")
    );
}

pub use super::filters::normalise;
