#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Issue #15, against the real binary and a real sandbox in every Linux
//! tier (both when bwrap works; the landlock tier alone under
//! `CODEWHALE_TEST_NO_BWRAP=1`), as whoever runs the suite (root and the
//! unprivileged `cwtest` in CI):
//! - the workspace, seen from the host with `git status --porcelain`,
//!   shows nothing new while a sandboxed command runs, after it, and after
//!   codewhale is SIGKILLed mid-run;
//! - writes to protected paths are reverted after the run (landlock tier:
//!   existing and new ones; bwrap tier: new ones, existing ones are
//!   read-only mounts), quarantined, never deleted, and named in the
//!   report; the positive control (an ordinary file) stays;
//! - after a SIGKILL the next codewhale command (any, here `--version`)
//!   undoes what the dead run left; `doctor` says nothing is pending.

mod common;

use common::sandbox::*;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

fn ww_cases() -> Vec<Case> {
    cases().into_iter().filter(|c| c.ww()).collect()
}

/// `git status --porcelain --untracked-files=all` from the host, minus
/// the given names (files the test's own command made on purpose).
fn status(fx: &Fx, except: &[&str]) -> Vec<String> {
    fx.git(&fx.ws, &["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .filter(|l| !except.iter().any(|e| l.ends_with(e)))
        .map(str::to_owned)
        .collect()
}

fn wait_for(p: &Path, what: &str) {
    let t = Instant::now();
    while !p.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what} never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn quarantine(fx: &Fx) -> std::path::PathBuf {
    fx.home.join(".codewhale/integrity/quarantine")
}

/// Every file under `dir` whose contents are `text`.
fn files_with(dir: &Path, text: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(files_with(&p, text));
        } else if fs::read_to_string(&p).is_ok_and(|s| s.trim() == text) {
            out.push(p);
        }
    }
    out
}

fn reverted_paths(r: &Run) -> Vec<String> {
    r.enforcement()["reverted"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v["path"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn git_status_shows_nothing_new_during_and_after_a_run() {
    for case in ww_cases() {
        let fx = Fx::new();
        let before = status(&fx, &[]);
        let mark = fx.ws.join("started.mark");
        let child = fx
            .command(
                &case,
                &[],
                &["sh", "-c", "echo > started.mark; sleep 2; echo done"],
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&mark, "the sandboxed command's marker");
        // Poll while the command sleeps: no placeholder may appear.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(1200) {
            assert_eq!(
                status(&fx, &["started.mark"]),
                before,
                "[{case}] during the run"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "[{case}] {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
        assert_eq!(status(&fx, &["started.mark"]), before, "[{case}] after");
        // Positive control: the poll does see what a command makes.
        assert!(status(&fx, &[]).iter().any(|l| l.ends_with("started.mark")));
    }
}

#[test]
fn a_sigkilled_run_leaves_nothing_once_the_next_command_starts() {
    for case in ww_cases() {
        let fx = Fx::new();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        let before = status(&fx, &[]);
        let mark = fx.ws.join("started.mark");
        let mut child = fx
            .command(
                &case,
                &[],
                &[
                    "sh",
                    "-c",
                    "echo EVIL-ENVRC > .envrc; mkdir -p .vscode; echo EVIL > .vscode/tasks.json; \
                     echo '[core] fsmonitor = evil' >> .git/config 2>/dev/null; \
                     echo > started.mark; sleep 30",
                ],
            )
            .spawn()
            .unwrap();
        wait_for(&mark, "the sandboxed command's marker");
        // SIGKILL: codewhale gets no chance to clean up.
        child.kill().unwrap();
        child.wait().unwrap();
        // The sandbox goes with it (bwrap --die-with-parent; the landlock
        // stage's lifeline), then the next command starts.
        let t = Instant::now();
        while process_with_mark("echo EVIL-ENVRC") {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "[{case}] sandbox survived"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The landlock stage holds the run's lock until it has reaped the
        // tree (a next command that starts before sees a live run and
        // leaves it alone): the dead run is over when the lock is free.
        fx.wait_run_unlocked(&case.to_string());
        // During the dead run (until the next command) the command's
        // writes are there: this is what "held only after the run" means.
        let next = fx.next_command();
        let err = String::from_utf8_lossy(&next.stderr);
        assert!(
            err.contains(".envrc"),
            "[{case}] the next command says what it undid: {err}"
        );
        assert!(!fx.ws.join(".envrc").exists(), "[{case}]");
        assert!(!fx.ws.join(".vscode").exists(), "[{case}]");
        assert_eq!(
            fx.read(&fx.ws.join(".git/config")).unwrap(),
            config,
            "[{case}]"
        );
        assert_eq!(status(&fx, &["started.mark"]), before, "[{case}]");
        // Quarantined, not deleted.
        assert_eq!(
            files_with(&quarantine(&fx), "EVIL-ENVRC").len(),
            1,
            "[{case}]"
        );
        // doctor finds nothing left to repair.
        let doc = std::process::Command::new(BIN)
            .args(["doctor", "--json", "-C"])
            .arg(&fx.ws)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap_or_default();
        assert_eq!(
            v["integrity"]["pending"].as_array().map(Vec::len),
            Some(0),
            "[{case}] {}",
            String::from_utf8_lossy(&doc.stdout)
        );
    }
}

#[test]
fn protected_writes_are_reverted_and_reported_and_ordinary_files_stay() {
    for case in ww_cases() {
        let fx = Fx::new();
        fs::create_dir_all(fx.ws.join(".vscode")).unwrap();
        fs::write(fx.ws.join(".vscode/settings.json"), "{}").unwrap();
        fs::write(fx.ws.join(".mcp.json"), "{}").unwrap();
        let config = fx.read(&fx.ws.join(".git/config")).unwrap();
        let hooks: Vec<_> = fs::read_dir(fx.ws.join(".git/hooks"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let r = fx.sh(
            &case,
            "mkdir -p .codewhale; echo 'sandbox=\"danger-full-access\"' > .codewhale/config.toml; \
             echo EVIL > .envrc; echo EVIL > .vscode/tasks.json; echo EVIL > .mcp.json; \
             echo EVIL > .gitmodules; \
             git config core.fsmonitor evil 2>/dev/null; \
             (mv .git/hooks .git/hooks-old && mkdir .git/hooks && echo EVIL > .git/hooks/pre-commit \
              && chmod +x .git/hooks/pre-commit) 2>/dev/null; \
             echo ok > other.json",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        // Positive control: the ordinary write landed and stays.
        assert_eq!(fx.read(&fx.ws.join("other.json")).as_deref(), Some("ok\n"));
        // Host state: every protected path is as before.
        assert!(!fx.ws.join(".codewhale").exists(), "[{case}]");
        assert!(!fx.ws.join(".envrc").exists(), "[{case}]");
        assert!(!fx.ws.join(".gitmodules").exists(), "[{case}]");
        assert!(!fx.ws.join(".vscode/tasks.json").exists(), "[{case}]");
        assert_eq!(
            fx.read(&fx.ws.join(".mcp.json")).as_deref(),
            Some("{}"),
            "[{case}]"
        );
        assert_eq!(
            fx.read(&fx.ws.join(".git/config")).unwrap(),
            config,
            "[{case}]"
        );
        assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "[{case}]");
        let now: Vec<_> = fs::read_dir(fx.ws.join(".git/hooks"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(now.len(), hooks.len(), "[{case}]");
        // git on the host still works and runs nothing of the command's.
        fx.git(&fx.ws, &["status", "--porcelain"]);
        // Reported by path, and never `full`.
        let reverted = reverted_paths(&r);
        let ws = fx.ws.display().to_string();
        for p in [".codewhale", ".envrc", ".gitmodules"] {
            assert!(
                reverted.contains(&format!("{ws}/{p}")),
                "[{case}] {p} not reported: {reverted:?}"
            );
            assert!(reported_partial(&r, &[p, "reverted after"]), "[{case}] {p}");
        }
        if !case.tier.namespaces {
            // Existing ones are writable during a landlock-tier run.
            for p in [".mcp.json", ".vscode", ".git/config", ".git/hooks"] {
                assert!(
                    reverted.contains(&format!("{ws}/{p}")),
                    "[{case}] {p} not reported: {reverted:?}"
                );
            }
        } else {
            // …and read-only mounts in the bwrap tier: nothing to revert.
            for p in [".mcp.json", ".vscode", ".git/config", ".git/hooks"] {
                assert!(!reverted.contains(&format!("{ws}/{p}")), "[{case}] {p}");
            }
        }
        assert_eq!(r.enforcement()["level"], "partial", "[{case}]");
        // Quarantined, never deleted.
        assert!(!files_with(&quarantine(&fx), "EVIL").is_empty(), "[{case}]");
    }
}

#[test]
fn git_commit_rebase_stash_and_branch_switch_work_and_revert_nothing() {
    for case in ww_cases() {
        let fx = Fx::new();
        // In a subdirectory: in the landlock tier, entries created directly
        // in a root that holds a masked `.env` are unreadable (reported
        // over-restricted; see docs/SANDBOX.md).
        fs::create_dir(fx.ws.join("src")).unwrap();
        let r = fx.sh(
            &case,
            "set -e; cd src; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t \
             GIT_COMMITTER_EMAIL=t@t; \
             echo a > a.txt; git add a.txt; git commit -qm a; \
             echo b > b.txt; git add b.txt; git commit -qm b; \
             GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/reword/' GIT_EDITOR=true git rebase -q -i HEAD~1; \
             echo c > a.txt; git stash -q; git stash pop -q; git checkout -q a.txt; \
             git checkout -q -b side; git checkout -q -; git log --oneline | wc -l",
        );
        assert!(r.ok(), "[{case}] {r:?}");
        assert_eq!(r.stdout.lines().last(), Some("3"), "[{case}] {r:?}");
        assert!(reverted_paths(&r).is_empty(), "[{case}] {r:?}");
        assert_eq!(fx.git(&fx.ws, &["log", "--format=%s"]).lines().count(), 3);
    }
}

/// `sandbox explain` says what holds during the run and what only after.
#[test]
fn explain_says_what_holds_during_and_only_after_the_run() {
    let fx = Fx::new();
    for (backend, during_hooks) in [("bwrap", true), ("landlock", false)] {
        let out = std::process::Command::new(BIN)
            .args(["sandbox", "explain", "--json", "--backend", backend, "-C"])
            .arg(&fx.ws)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let has = |key: &str, p: &str| {
            v[key]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x.as_str() == Some(&fx.ws.join(p).display().to_string()))
        };
        assert_eq!(
            has("protected_during_run", ".git/hooks"),
            during_hooks,
            "{backend}"
        );
        assert_eq!(
            has("protected_after_run", ".git/hooks"),
            !during_hooks,
            "{backend}"
        );
        assert!(has("protected_after_run", ".envrc"), "{backend}");
        let text = std::process::Command::new(BIN)
            .args(["sandbox", "explain", "--backend", backend, "-C"])
            .arg(&fx.ws)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&text.stdout);
        assert!(t.contains("held only after the run"), "{t}");
    }
}

/// The landlock tier's stage keeps the run's integrity lock until it has
/// killed and reaped the tree, so a check started right after a SIGKILL
/// of codewhale cannot run while the dead run's processes still write:
/// the stage holds the lock file open, the command does not (it is
/// close-on-exec), and after codewhale is SIGKILLed the lock stays held
/// until the stage is gone.
#[test]
fn the_landlock_stage_holds_the_run_lock_and_the_command_does_not() {
    let Some(case) = ww_cases().into_iter().find(|c| c.tier.name == "landlock") else {
        panic!("no landlock tier on this machine");
    };
    let fx = Fx::new();
    let mark = fx.ws.join("started.mark");
    // A duration no other process has (leftovers of an earlier run).
    // (`processes_with_mark` matches the raw, NUL-separated command line:
    // the mark is the duration alone.)
    let dur = format!("29.{}", std::process::id());
    let sleep = format!("sleep {dur}");
    let script = format!("echo > started.mark; exec {sleep}");
    let mut child = KillOnDrop(
        fx.command(&case, &[], &["sh", "-c", &script])
            .spawn()
            .unwrap(),
    );
    wait_for(&mark, "the sandboxed command's marker");
    let holders = || -> Vec<(u32, String)> {
        let mut v = Vec::new();
        for e in fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(fds) = fs::read_dir(e.path().join("fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                let Ok(target) = fs::read_link(fd.path()) else {
                    continue;
                };
                let t = target.to_string_lossy().into_owned();
                if t.contains("/integrity/runs/") && t.ends_with("/active") {
                    let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    v.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
                }
            }
        }
        v
    };
    // The command is the process whose own command line is `sleep 29.5`
    // (codewhale's and the stage's name it among their arguments); the
    // marker is written just before `exec`.
    let command = || -> Vec<String> {
        processes_with_mark(&dur)
            .into_iter()
            .filter(|l| l.contains(&format!(": {sleep}")))
            .collect()
    };
    assert!(
        eventually(5000, || command().len() == 1),
        "the command runs: {:?}",
        processes_with_mark(&dur)
    );
    let during = holders();
    // Positive control: codewhale itself holds it, and so does one more
    // process (the stage, which shares codewhale's command line).
    assert!(
        during.iter().any(|(p, _)| *p == child.0.id()),
        "codewhale holds the lock: {during:?}"
    );
    assert!(
        during.iter().any(|(p, _)| *p != child.0.id()),
        "the stage holds the lock: {during:?}"
    );
    assert!(
        !during.iter().any(|(_, c)| c.starts_with(&sleep)),
        "the command must not hold the lock: {during:?}"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // Until the stage is gone the lock is held; once it is, nobody has it.
    let t = Instant::now();
    while !holders().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "the stage survived");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        command().is_empty(),
        "the lock was released while the command still ran"
    );
}

/// Kills the child when the test ends, also when it fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Repositories nested in the workspace are read by host git too: a
/// gitlinked embedded repository's `core.fsmonitor` runs at the next
/// `git status` in the workspace, and `.git/commondir` makes git take the
/// whole config from another directory. Both are written during the run
/// (nothing forbids `git init` or writing inside `.git/`), so the
/// after-run check quarantines each file that would run host code and
/// keeps a clean nested repository. Positive control: the same script
/// outside the sandbox makes host `git status` run the command's program.
#[test]
fn nested_repositories_written_during_a_run_run_nothing_on_the_host() {
    let script = |top: &Path, pwned: &Path| {
        format!(
            "set -e; cd {top}/src; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
             GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; \
             git init -q evil; git -C evil commit -q --allow-empty -m e; \
             git -C evil config core.fsmonitor 'touch {p}.fsmonitor; false'; \
             git init -q clean; git -C clean commit -q --allow-empty -m c; \
             git add evil clean 2>/dev/null; \
             mkdir -p ../elsewhere/objects ../elsewhere/refs; cp ../.git/HEAD ../elsewhere/HEAD; \
             printf '[core]\\n\\tfsmonitor = \"touch {p}.commondir; false\"\\n' > ../elsewhere/config; \
             echo ../elsewhere > ../.git/commondir; echo ok",
            top = top.display(),
            p = pwned.display()
        )
    };
    // Positive control, no sandbox: host git runs both programs.
    {
        let fx = Fx::new();
        let top = fx.root.join("control");
        fs::create_dir_all(top.join("src")).unwrap();
        fx.git(&top, &["init", "-q"]);
        fx.git(&top, &["commit", "-q", "--allow-empty", "-m", "i"]);
        let pwned = fx.root.join("control-pwned");
        let r = fx.unsandboxed(&script(&top, &pwned));
        assert!(r.ok(), "{r:?}");
        // Unchecked exit: the point is what it starts, not what it says.
        let host_status = || {
            let _ = std::process::Command::new("git")
                .args(["status", "--porcelain"])
                .current_dir(&top)
                .env("HOME", &fx.home)
                .output();
        };
        host_status();
        assert!(
            pwned.with_extension("commondir").exists(),
            "control: commondir redirect runs host code"
        );
        fs::remove_file(top.join(".git/commondir")).unwrap();
        host_status();
        assert!(
            pwned.with_extension("fsmonitor").exists(),
            "control: a gitlinked repository's fsmonitor runs host code"
        );
    }
    for case in ww_cases() {
        let fx = Fx::new();
        fs::create_dir_all(fx.ws.join("src")).unwrap();
        let pwned = fx.root.join("pwned");
        let r = fx.sh(&case, &script(&fx.ws, &pwned));
        assert!(r.ok(), "[{case}] {r:?}");
        assert_eq!(r.stdout.trim(), "ok", "[{case}]");
        // Host git in the workspace afterwards runs nothing of the command's.
        fx.git(&fx.ws, &["status", "--porcelain"]);
        assert!(!pwned.with_extension("fsmonitor").exists(), "[{case}]");
        assert!(!pwned.with_extension("commondir").exists(), "[{case}]");
        assert!(!fx.ws.join(".git/commondir").exists(), "[{case}]");
        assert!(!fx.ws.join("src/evil/.git/config").exists(), "[{case}]");
        // The clean nested repository is kept, as is the gitlink work.
        assert!(fx.ws.join("src/clean/.git/config").exists(), "[{case}]");
        let staged = fx.git(&fx.ws, &["ls-files", "--stage"]);
        assert!(
            staged.contains("160000") && staged.contains("src/clean"),
            "[{case}] {staged}"
        );
        // Reported by path, quarantined (never deleted).
        let reverted = reverted_paths(&r);
        let ws = fx.ws.display().to_string();
        for p in ["src/evil/.git/config", ".git/commondir"] {
            assert!(
                reverted.contains(&format!("{ws}/{p}")),
                "[{case}] {p} not reported: {reverted:?}"
            );
        }
        assert!(
            !reverted.iter().any(|p| p.contains("src/clean")),
            "[{case}] {reverted:?}"
        );
        let q = quarantine(&fx);
        let kept = fs::read_dir(&q).is_ok_and(|mut d| d.next().is_some());
        assert!(kept, "[{case}] nothing in {}", q.display());
        assert_eq!(r.enforcement()["level"], "partial", "[{case}]");
    }
}

/// The recorded sandbox inits of the run (`pid-starttime` names).
fn records(fx: &Fx) -> Vec<(i32, u64)> {
    let Ok(rd) = fs::read_dir(fx.integrity_run_dir().join("sandboxes")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let (p, s) = n.split_once('-')?;
            Some((p.parse().ok()?, s.parse().ok()?))
        })
        .collect()
}

/// Field 22 of `/proc/PID/stat`: the start time a record names.
fn start_time(pid: u32) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A run of `case` whose codewhale was SIGKILLed, once its sandbox is gone
/// (its baseline is a dead run's now). In the bwrap tier the run recorded
/// its sandbox's pid-namespace init before the command started: it is
/// on record by the time the command's first act (the marker) is done.
fn dead_run(fx: &Fx, case: &Case) {
    let mark = fx.ws.join("started.mark");
    let dur = format!("28.{}", std::process::id());
    let script = format!("echo > started.mark; exec sleep {dur}");
    let mut child = fx
        .command(case, &[], &["sh", "-c", &script])
        .spawn()
        .unwrap();
    wait_for(&mark, "the sandboxed command's marker");
    if case.tier.name == "bwrap" {
        let recs = records(fx);
        assert_eq!(recs.len(), 1, "[{case}] the init is on record first");
        let (pid, _) = recs[0];
        let ns = |p: &str| fs::read_link(format!("/proc/{p}/ns/pid")).unwrap();
        assert_ne!(
            ns(&pid.to_string()),
            ns("self"),
            "[{case}] the record names the sandbox's own pid namespace init"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    while process_with_mark(&dur) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "[{case}] sandbox survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The landlock stage holds the run's lock until it has reaped the
    // tree; only then is the baseline a dead run's.
    fx.wait_run_unlocked(&case.to_string());
    fs::remove_file(&mark).unwrap();
}

/// A write that lands after codewhale's death — a process of the dead
/// run's sandbox still finishing its last system call while the kernel
/// tears the namespace down — is reverted, because the next command waits
/// for every sandbox init the dead run recorded before it checks. Here the
/// late writer is an ordinary process put on record as that init (the
/// kernel's teardown cannot be slowed on demand); the positive control is
/// the same late write without the record: it lands after the check and
/// stays. A run that ends normally leaves no record behind.
#[test]
fn the_check_of_a_dead_run_waits_for_its_recorded_sandboxes() {
    for case in ww_cases() {
        for recorded in [true, false] {
            let fx = Fx::new();
            let done = fx.command(&case, &[], &["true"]).output().unwrap();
            assert!(done.status.success(), "[{case}] {done:?}");
            assert!(
                records(&fx).is_empty(),
                "[{case}] a finished run's record stays"
            );
            dead_run(&fx, &case);
            let late = std::process::Command::new("sh")
                .args(["-c", "sleep 2; echo LATE-WRITE > .envrc"])
                .current_dir(&fx.ws)
                .spawn()
                .unwrap();
            if recorded {
                let pid = late.id();
                let dir = fx.integrity_run_dir().join("sandboxes");
                fs::create_dir_all(&dir).unwrap();
                fs::write(dir.join(format!("{pid}-{}", start_time(pid))), b"").unwrap();
            }
            fx.next_command();
            let mut late = late;
            late.wait().unwrap();
            let landed = fx.ws.join(".envrc").exists();
            if recorded {
                assert!(!landed, "[{case}] the late write stayed");
                assert_eq!(
                    files_with(&quarantine(&fx), "LATE-WRITE").len(),
                    1,
                    "[{case}] quarantined"
                );
                assert!(records(&fx).is_empty(), "[{case}] the record is dropped");
            } else {
                // Positive control: without the wait the check ran first.
                assert!(
                    landed,
                    "[{case}] control: the late write lands after the check"
                );
            }
        }
    }
}
