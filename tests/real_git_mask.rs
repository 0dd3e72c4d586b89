#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The `.env` mask is invisible to git (src/policy/git_view.rs).
//!
//! A repository commits `.env` files at several depths (as framework
//! templates do), the user has a secret local change in one of them and
//! an untracked, not ignored `.env.local`. Inside the sandbox, in every
//! tier, a whole git workflow (status, commit -am, add -A, stash/pop,
//! checkout, rebase, pull --rebase from a local remote, `grep -r`, a
//! Python copytree) succeeds, and afterwards on the host: no commit
//! touched a `.env` file, no secret reached the history or a stash, the
//! files and the host's `info/exclude` are unchanged, and `git status`
//! shows exactly what it showed before. Before git_view, the landlock
//! tier committed the files emptied and the bwrap tier failed commit -am,
//! stash and add -A (shared/research/real-workloads.md, D1 and D2).

mod common;

use common::sandbox::*;
use std::fs;
use std::path::Path;

const LOCAL_SECRET: &str = "LOCAL-SECRET-MARK";
const UNTRACKED_SECRET: &str = "UNTRACKED-SECRET-MARK";
const COMMITTED: &str = "COMMITTED-TEMPLATE";

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// The fixture's repository with committed `.env` files, a remote, and
/// the user's local state.
fn setup(fx: &Fx) -> (std::path::PathBuf, String) {
    let ws = &fx.ws;
    // Fx made `.env` (untracked, DOTENV_MARK) and committed README: this
    // repository commits its `.env` files instead.
    write(&ws.join(".env"), &format!("{COMMITTED}=root\n"));
    write(
        &ws.join("app/.env.development"),
        &format!("{COMMITTED}=app\nAPI_KEY=\n"),
    );
    write(&ws.join("a/b/c/.env.test"), &format!("{COMMITTED}=deep\n"));
    fx.git(ws, &["add", "-A"]);
    fx.git(ws, &["commit", "-qm", "templates"]);
    let main = fx
        .git(ws, &["symbolic-ref", "--short", "HEAD"])
        .trim()
        .to_string();
    // A local remote one commit ahead.
    let remote = fx.root.join("remote.git");
    fx.git(
        &fx.root,
        &["clone", "-q", "--bare", ws.to_str().unwrap(), "remote.git"],
    );
    fx.git(ws, &["remote", "add", "origin", remote.to_str().unwrap()]);
    fx.git(
        &fx.root,
        &["clone", "-q", remote.to_str().unwrap(), "upstream"],
    );
    let up = fx.root.join("upstream");
    write(&up.join("upstream.txt"), "from upstream\n");
    fx.git(&up, &["add", "upstream.txt"]);
    fx.git(&up, &["commit", "-qm", "upstream"]);
    fx.git(&up, &["push", "-q", "origin", &main]);
    fx.git(ws, &["fetch", "-q", "origin"]);
    // The user's local state: a secret filled into a committed template,
    // and an untracked secret file.
    write(
        &ws.join("app/.env.development"),
        &format!("{COMMITTED}=app\nAPI_KEY={LOCAL_SECRET}\n"),
    );
    write(&ws.join(".env.local"), &format!("KEY={UNTRACKED_SECRET}\n"));
    (remote, main)
}

fn host_status(fx: &Fx) -> Vec<String> {
    let mut v: Vec<String> = fx
        .git(&fx.ws, &["status", "--porcelain"])
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn a_git_workflow_in_a_repository_with_committed_env_files() {
    for tier in tiers() {
        let case = Case {
            tier,
            mode: Mode::Ww,
        };
        let fx = Fx::new();
        let (remote, main) = setup(&fx);
        let status_before = host_status(&fx);
        // Positive controls: outside the sandbox the secrets are readable
        // and git lists both local changes.
        let plain = fx.unsandboxed("cat app/.env.development .env.local");
        assert!(
            plain.stdout.contains(LOCAL_SECRET) && plain.stdout.contains(UNTRACKED_SECRET),
            "{plain:?}"
        );
        assert_eq!(
            status_before,
            vec![" M app/.env.development", "?? .env.local"],
            "[{case}]"
        );
        let exclude = fx.ws.join(".git/info/exclude");
        let exclude_before = fs::read(&exclude).unwrap();

        let script = format!(
            r#"
g() {{ git -c user.name=t -c user.email=t@t "$@"; }}
step() {{ name=$1; shift; if "$@"; then echo "ok $name"; else echo "FAILED $name rc=$?"; fi; }}
echo "status<$(git status --porcelain)>"
step commit-am sh -c 'echo x >> README && git -c user.name=t -c user.email=t@t commit -qam tweak'
echo "files-commit-am<$(git show --name-only --format= HEAD)>"
step add-all sh -c 'echo new > new.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm add'
echo "files-add-all<$(git show --name-only --format= HEAD)>"
step stash sh -c 'echo y >> README && git stash -q'
step stash-pop git stash pop -q
step commit-y g commit -qam y
step branch sh -c 'git checkout -q -b feature && echo f > f.txt && git add f.txt && git -c user.name=t -c user.email=t@t commit -qm f'
step checkout git checkout -q {main}
step main-commit sh -c 'echo m >> README && git -c user.name=t -c user.email=t@t commit -qam m'
step rebase sh -c 'git checkout -q feature && git -c user.name=t -c user.email=t@t rebase -q {main} && git checkout -q {main}'
step pull-rebase g pull -q --rebase origin {main}
step grep-r sh -c 'grep -r -l "" . >/dev/null'
step copytree python3 -c "import shutil, tempfile, os; shutil.copytree('.', os.path.join(tempfile.mkdtemp(), 'c'))"
echo "status-after<$(git status --porcelain)>"
echo "read-tracked<$(cat .env)>"
echo "read-modified<$(cat app/.env.development)>"
echo "read-untracked<$(cat .env.local 2>&1)>"
"#
        );
        let r = fx.run(
            &case,
            &["--writable-root", remote.to_str().unwrap()],
            &["sh", "-c", &script],
        );
        let out = &r.stdout;
        assert!(r.ok(), "[{case}] {r:?}");
        assert!(
            !out.contains("FAILED"),
            "[{case}] a git step failed:\n{out}\n{}",
            r.stderr
        );
        for step in [
            "commit-am",
            "add-all",
            "stash",
            "stash-pop",
            "commit-y",
            "branch",
            "checkout",
            "main-commit",
            "rebase",
            "pull-rebase",
            "grep-r",
            "copytree",
        ] {
            assert!(
                out.contains(&format!("ok {step}\n")),
                "[{case}] {step}:\n{out}"
            );
        }
        // Git inside sees no change to any masked file.
        assert!(out.contains("status<>"), "[{case}]\n{out}");
        assert!(out.contains("status-after<>"), "[{case}]\n{out}");
        assert!(out.contains("files-commit-am<README>"), "[{case}]\n{out}");
        assert!(out.contains("files-add-all<new.txt>"), "[{case}]\n{out}");
        // What the command read: the committed template (readable, and
        // said so), the indexed version instead of the local secret, and
        // nothing of the untracked file.
        assert!(
            out.contains(&format!("read-tracked<{COMMITTED}=root>")),
            "[{case}]\n{out}"
        );
        assert!(
            out.contains(&format!("read-modified<{COMMITTED}=app\nAPI_KEY=>")),
            "[{case}]\n{out}"
        );
        assert!(
            !out.contains(LOCAL_SECRET) && !out.contains(UNTRACKED_SECRET),
            "[{case}]\n{out}"
        );
        assert!(
            reported_partial(
                &r,
                &[".env", "tracked by git and unchanged, so left readable"]
            ),
            "[{case}] {}",
            r.enforcement()["partial"]
        );

        // The host afterwards.
        assert_eq!(
            fx.read(&fx.ws.join("app/.env.development")).unwrap(),
            format!("{COMMITTED}=app\nAPI_KEY={LOCAL_SECRET}\n"),
            "[{case}]"
        );
        assert_eq!(
            fx.read(&fx.ws.join(".env.local")).unwrap(),
            format!("KEY={UNTRACKED_SECRET}\n"),
            "[{case}]"
        );
        assert_eq!(
            fs::read(&exclude).unwrap(),
            exclude_before,
            "[{case}] info/exclude"
        );
        assert_eq!(host_status(&fx), status_before, "[{case}]");
        let log = fx.git(&fx.ws, &["log", "-p", "--all"]);
        assert!(
            !log.contains(LOCAL_SECRET) && !log.contains(UNTRACKED_SECRET),
            "[{case}] a secret reached the history"
        );
        assert!(
            log.contains("upstream.txt"),
            "[{case}] pull --rebase did not land"
        );
        let touched = fx.git(
            &fx.ws,
            &[
                "log",
                "--format=%s",
                "--",
                ".env",
                "app/.env.development",
                "a/b/c/.env.test",
                ".env.local",
            ],
        );
        assert_eq!(
            touched.trim(),
            "templates",
            "[{case}] a commit touched a .env file"
        );
        assert_eq!(fx.git(&fx.ws, &["stash", "list"]), "", "[{case}]");
    }
}

/// An untracked, not ignored `.env` in a plain repository: `git add -A`
/// and a commit inside leave it untracked (before, the landlock tier made
/// it tracked and empty, so the user's next `git commit -am` committed the
/// real secret; the bwrap tier failed `git add -A`).
#[test]
fn an_untracked_env_never_becomes_tracked() {
    for tier in tiers() {
        let case = Case {
            tier,
            mode: Mode::Ww,
        };
        let fx = Fx::new();
        let r = fx.sh(
            &case,
            "echo x >> README && git add -A && git -c user.name=t -c user.email=t@t commit -qm agent && git show --name-only --format= HEAD",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        let added: Vec<&str> = r.stdout.lines().collect();
        assert!(added.contains(&"README"), "[{case}] {r:?}");
        assert!(!added.contains(&".env"), "[{case}] {r:?}");
        // The user's next commit on the host holds no secret.
        fs::write(fx.ws.join("README"), "user edit\n").unwrap();
        fx.git(&fx.ws, &["commit", "-qam", "user"]);
        let tree = fx.git(&fx.ws, &["ls-tree", "-r", "--name-only", "HEAD"]);
        assert!(
            !tree.lines().any(|l| l == ".env"),
            "[{case}] .env tracked: {tree}"
        );
        assert_eq!(fx.read(&fx.ws.join(".env")).as_deref(), Some(DOTENV_MARK));
        // Positive control: unsandboxed, the same `git add -A` takes it.
        let c = fx.unsandboxed("git add -A && git diff --cached --name-only");
        assert!(c.stdout.lines().any(|l| l == ".env"), "{c:?}");
    }
}

/// doctor says what the runs say: a tracked `.env` is left readable
/// (warn, `partial`), an untracked one is masked (ok).
#[test]
fn doctor_names_tracked_env_files_as_left_readable() {
    let fx = Fx::new();
    let row = |fx: &Fx| {
        let out = std::process::Command::new(BIN)
            .args(["doctor", "--json", "-C"])
            .arg(&fx.ws)
            .env("HOME", &fx.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == "workspace.env-files")
            .unwrap()
            .clone()
    };
    // Control: Fx's `.env` is untracked, so masked.
    let r = row(&fx);
    assert_eq!(r["status"], "ok", "{r}");
    fx.git(&fx.ws, &["add", "-f", ".env"]);
    fx.git(&fx.ws, &["commit", "-qm", "track it"]);
    let r = row(&fx);
    assert_eq!(r["status"], "warn", "{r}");
    assert!(
        r["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("tracked by git and left readable")
            || r.to_string().contains("tracked by git and left readable"),
        "{r}"
    );
}
