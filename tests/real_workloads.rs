#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Ordinary toolchains in the real sandbox, in every Linux tier, as whoever
//! runs the suite (CI: root, the unprivileged `cwtest`, and with bwrap
//! hidden), network off, nothing downloaded: a workspace with a `.env` at
//! its root and a git repository, and one small project per toolchain:
//! - `cargo build` + `cargo test --offline` of a crate with one vendored
//!   (path) dependency;
//! - `python3 -m venv` + `pip install --no-index` of a wheel assembled in
//!   the test with the standard library (`zipfile`, PEP 427 layout: the
//!   machine's setuptools predates the bundled `bdist_wheel`, and `wheel`
//!   is not installed) + `python3 -m unittest`;
//! - `node --test`;
//! - `make` with a generated header;
//! - `git commit`, `git rebase -i` with `GIT_SEQUENCE_EDITOR`, `git stash`,
//!   `git worktree add`.
//!
//! Each checks the command's result and the host afterwards: `.env` never
//! printed, protected paths unchanged, nothing reverted, `git status`
//! showing only what the toolchain made.
//!
//! The Python project and a second Rust crate live in the workspace root,
//! next to the masked `.env`. In the landlock tier `.env` is masked by a
//! read-only mount in the command's mount namespace and the root granted
//! whole (strategy `mask`), so what the command creates there runs too.
//! With the test seam `CODEWHALE_TEST_LANDLOCK_NO_MASK=1` the tier falls
//! back to the carve (read is granted on the root's children except
//! `.env`): what the command creates there (`venv/`, `target/`) is read
//! through the opener (src/host/backends/landlock/opener/), which cannot
//! serve `execve`, so a binary built there cannot run in the same run:
//! asserted, and reported, in `cargo_build_in_the_root_next_to_env`; the
//! full cargo case (build, run, test) uses a subdirectory that exists
//! before the run.
//!
//! Cost: one crate build (two tiny crates, no registry), a venv without
//! upgrading pip; a few seconds per tier.

mod common;

use common::sandbox::*;
use std::fs;
use std::path::{Path, PathBuf};

/// Whether the landlock tier is expected to mask `.env` (the default) or
/// to fall back to the carve and the opener (the test seam
/// `CODEWHALE_TEST_LANDLOCK_NO_MASK=1` in this process's environment,
/// which codewhale inherits).
fn expect_mask() -> bool {
    std::env::var("CODEWHALE_TEST_LANDLOCK_NO_MASK").map_or(true, |v| v.trim() != "1")
}

/// In the landlock tier: the report names the strategy expected.
fn strategy_reported(case: &Case, r: &Run) {
    if !case.tier.namespaces {
        let want = if expect_mask() {
            "mask"
        } else {
            "carve+opener"
        };
        assert_eq!(
            r.enforcement()["deny_read_strategy"],
            want,
            "[{case}] {}",
            r.enforcement()
        );
    }
}

fn ww_cases() -> Vec<Case> {
    cases().into_iter().filter(|c| c.ww()).collect()
}

fn python() -> PathBuf {
    for p in ["/usr/bin/python3", "/usr/local/bin/python3"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("python3 is not installed in /usr/bin or /usr/local/bin: ci/setup installs it");
}

fn sh(fx: &Fx, case: &Case, script: &str) -> Run {
    let path = format!(
        "{}:{}",
        cargo_bin_dir().display(),
        if no_bwrap() {
            path_without_bwrap().display().to_string()
        } else {
            "/usr/local/bin:/usr/bin:/bin".into()
        }
    );
    // The fixture's TMPDIR is a host path that does not exist (a fresh
    // machine); inside bwrap the private /tmp is where temp files go.
    let script = format!(
        "export PATH='{path}' PY='{}'; [ -d \"$TMPDIR\" ] || export TMPDIR=/tmp; {script}",
        python().display()
    );
    fx.run(&case_ref(case), &[], &["sh", "-c", &script])
}

fn case_ref(c: &Case) -> Case {
    Case {
        tier: c.tier,
        mode: c.mode,
    }
}

/// What every workload checks on the host afterwards.
fn host_clean(fx: &Fx, case: &Case, r: &Run, config: &str) {
    assert!(
        !r.stdout.contains(DOTENV_MARK) && !r.stderr.contains(DOTENV_MARK),
        "[{case}]"
    );
    assert_eq!(fx.read(&fx.ws.join(".env")).as_deref(), Some(DOTENV_MARK));
    assert_eq!(
        fx.read(&fx.ws.join(".git/config")).unwrap(),
        config,
        "[{case}]"
    );
    assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "[{case}]");
    assert!(
        r.enforcement()["reverted"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "[{case}] an ordinary workload wrote a protected path: {}",
        r.enforcement()["reverted"]
    );
    for p in [".envrc", ".vscode", ".codewhale", ".mcp.json", ".bashrc"] {
        assert!(!fx.ws.join(p).exists(), "[{case}] {p} appeared");
    }
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

#[test]
fn cargo_build_and_test_offline_with_a_vendored_dependency() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        let rs = fx.ws.join("rust");
        write(
            &rs.join("dep/Cargo.toml"),
            "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(&rs.join("dep/src/lib.rs"), "pub fn two() -> u32 { 2 }\n");
        write(
            &rs.join("app/Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ndep = { path = \"../dep\" }\n",
        );
        write(
            &rs.join("app/src/main.rs"),
            "fn main() { println!(\"answer={}\", dep::two() * 21); }\n\
             #[cfg(test)] mod t { #[test] fn four() { assert_eq!(dep::two() * 2, 4); } }\n",
        );
        let r = sh(
            &fx,
            &case,
            "set -e; cd rust/app; export CARGO_HOME=$PWD/../.cargo-home CARGO_TARGET_DIR=$PWD/target; \
             unset CARGO_BUILD_TARGET_DIR RUSTC_WRAPPER; \
             cargo build --offline -q; ./target/debug/app; \
             cargo test --offline -q 2>&1 | grep 'test result'",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        assert!(r.stdout.contains("answer=42"), "[{case}] {r:?}");
        assert!(r.stdout.contains("1 passed"), "[{case}] {r:?}");
        assert!(rs.join("app/target/debug/app").exists());
        host_clean(&fx, &case, &r, &config);
    }
}

/// A PEP 427 wheel of package `hello`, assembled with the stdlib.
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
files = {
    "hello/__init__.py": b"def greet():\n    return 'hello from a local wheel'\n",
    "hello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: hello\nVersion: 1.0\n",
    "hello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: stdlib\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("hello-1.0.dist-info/RECORD,,")
    z.writestr("hello-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;

#[test]
fn python_venv_local_wheel_and_unittest() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        let py = fx.ws.clone();
        write(&py.join("make_wheel.py"), MAKE_WHEEL);
        write(
            &py.join("tests/test_hello.py"),
            "import unittest, hello\n\
             class T(unittest.TestCase):\n    def test_greet(self):\n        \
             self.assertIn('local wheel', hello.greet())\n",
        );
        write(&py.join("tests/__init__.py"), "");
        let r = sh(
            &fx,
            &case,
            "set -e; unset PYTHONDONTWRITEBYTECODE; $PY make_wheel.py dist-hello-1.0-py3-none-any.whl; \
             mv dist-hello-1.0-py3-none-any.whl hello-1.0-py3-none-any.whl; \
             $PY -m venv venv; \
             venv/bin/python -m pip install -q --no-index --disable-pip-version-check \
               ./hello-1.0-py3-none-any.whl; \
             venv/bin/python -m unittest discover -s tests -t . 2>&1; \
             venv/bin/python -c 'import hello; print(hello.greet())'",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        assert!(r.stdout.contains("OK"), "[{case}] {r:?}");
        assert!(
            r.stdout.contains("hello from a local wheel"),
            "[{case}] {r:?}"
        );
        // unittest's bytecode caches were written where Python puts them.
        assert!(py.join("tests/__pycache__").is_dir(), "[{case}]");
        strategy_reported(&case, &r);
        if !case.tier.namespaces && !expect_mask() {
            assert!(
                reported_partial(&r, &["over-restricted", "opener active in"]),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
        }
        host_clean(&fx, &case, &r, &config);
    }
}

#[test]
fn node_test_runner() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        write(
            &fx.ws.join("js/sum.test.js"),
            "const test = require('node:test');\nconst assert = require('node:assert');\n\
             const fs = require('node:fs');\n\
             test('sum', () => { assert.strictEqual(1 + 2, 3); });\n\
             test('writes and reads back', () => { fs.mkdirSync('out', {recursive: true}); \
             fs.writeFileSync('out/x.txt', 'x'); assert.strictEqual(fs.readFileSync('out/x.txt', 'utf8'), 'x'); });\n",
        );
        let r = sh(&fx, &case, "set -e; cd js; node --test 2>&1");
        assert!(r.ok(), "[{case}] {r:?}");
        assert!(r.stdout.contains("pass 2"), "[{case}] {r:?}");
        host_clean(&fx, &case, &r, &config);
    }
}

#[test]
fn make_with_a_generated_header() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        let c = fx.ws.join("c");
        write(
            &c.join("Makefile"),
            "all: prog\n\tmkdir -p build\n\t./prog > build/out.txt\n\
             gen.h:\n\techo '#define ANSWER 42' > gen.h\n\
             prog: main.c gen.h\n\tcc -o prog main.c\n",
        );
        write(
            &c.join("main.c"),
            "#include <stdio.h>\n#include \"gen.h\"\nint main(void){printf(\"%d\\n\", ANSWER);return 0;}\n",
        );
        let r = sh(&fx, &case, "set -e; cd c; make -s; cat build/out.txt");
        assert!(r.ok(), "[{case}] {r:?}");
        assert_eq!(r.stdout.lines().last(), Some("42"), "[{case}] {r:?}");
        assert_eq!(fx.read(&c.join("build/out.txt")).as_deref(), Some("42\n"));
        host_clean(&fx, &case, &r, &config);
    }
}

#[test]
fn git_commit_rebase_stash_and_worktree() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        fs::create_dir(fx.ws.join("src")).unwrap();
        fs::create_dir(fx.ws.join("trees")).unwrap();
        let r = sh(
            &fx,
            &case,
            "set -e; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t \
             GIT_COMMITTER_EMAIL=t@t GIT_CONFIG_NOSYSTEM=1; cd src; \
             echo one > one.txt; git add one.txt; git commit -qm one; \
             echo two > two.txt; git add two.txt; git commit -qm two; \
             GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/reword/' GIT_EDITOR='sed -i 1s/two/TWO/' \
               git rebase -q -i HEAD~1 >/dev/null; \
             echo changed > one.txt; git stash -q; test \"$(cat one.txt)\" = one; \
             git stash pop -q; test \"$(cat one.txt)\" = changed; git checkout -q one.txt; \
             git worktree add -q ../trees/side -b side; \
             (cd ../trees/side && echo s > src/s.txt && git add src/s.txt && git commit -qm side); \
             git log --format=%s side | head -1; git log --format=%s | head -1",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        let lines: Vec<_> = r.stdout.lines().collect();
        assert_eq!(lines, ["side", "TWO"], "[{case}] {r:?}");
        // Host: the history is real and the worktree registered.
        let log = fx.git(&fx.ws, &["log", "--format=%s"]);
        assert!(log.starts_with("TWO\none\n"), "{log}");
        assert!(fx.git(&fx.ws, &["worktree", "list"]).contains("trees/side"));
        host_clean(&fx, &case, &r, &config);
    }
}

/// A crate in the workspace root, next to `.env`: `cargo build` and
/// running what it built work in the bwrap tier and in the landlock tier's
/// `mask` strategy. In the `carve+opener` fallback (test seam) `target/` is
/// a new entry of the carved root, read through the opener, and `execve` of
/// a file in it is denied (Landlock's execute right, which the opener
/// cannot give), and the report says so.
#[test]
fn cargo_build_in_the_root_next_to_env() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        write(
            &fx.ws.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(
            &fx.ws.join("src/main.rs"),
            "fn main() { println!(\"answer={}\", 6 * 7); }\n",
        );
        let r = sh(
            &fx,
            &case,
            "export CARGO_HOME=$PWD/.cargo-home CARGO_TARGET_DIR=$PWD/target; \
             unset CARGO_BUILD_TARGET_DIR RUSTC_WRAPPER; \
             cargo build --offline -q && echo built; ./target/debug/app; true",
        );
        assert!(r.stdout.contains("built"), "[{case}] {r:?}");
        assert!(fx.ws.join("target/debug/app").exists(), "[{case}]");
        strategy_reported(&case, &r);
        if case.tier.namespaces || expect_mask() {
            assert!(r.stdout.contains("answer=42"), "[{case}] {r:?}");
            assert!(
                !reported_partial(&r, &["over-restricted", "cannot be executed"]),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
        } else {
            assert!(!r.stdout.contains("answer=42"), "[{case}] {r:?}");
            assert!(r.stderr.contains("Permission denied"), "[{case}] {r:?}");
            assert!(
                reported_partial(
                    &r,
                    &["over-restricted", "opener active in", "cannot be executed"]
                ),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
        }
        host_clean(&fx, &case, &r, &config);
    }
}

/// What a masked `.env` in the root costs in each tier: in the landlock
/// tier the report names the strategy (`mask`, or with the test seam the
/// carve, and that the opener served the reads); in both, what the command
/// created in the root is readable.
#[test]
fn root_entries_next_to_env_are_readable_and_the_opener_is_reported() {
    for case in ww_cases() {
        let fx = Fx::new();
        let r = fx.sh(&case, "echo x > new.txt; cat new.txt");
        assert!(r.ok() && r.stdout.trim() == "x", "[{case}] {r:?}");
        strategy_reported(&case, &r);
        if !case.tier.namespaces && !expect_mask() {
            assert!(
                reported_partial(&r, &["over-restricted", ".env", "cannot be executed"]),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
            assert!(
                reported_partial(&r, &["over-restricted", "opener active in", "1 served"]),
                "[{case}] {}",
                r.enforcement()["partial"]
            );
        }
    }
}
