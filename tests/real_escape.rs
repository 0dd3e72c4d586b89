#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Escape catalogue, filesystem items (1–16, 35, 38, plus the issue's
//! "done when" checks), against the real binary and a real sandbox, for
//! every `(tier, mode)`. Each denial has a positive control and a check of
//! host state afterwards. Process, kernel and network items are in
//! `real_escape_proc.rs`.

mod common;

use common::sandbox::*;
use std::fs;

#[test]
fn done_when_workspace_write_and_home_write() {
    for case in cases() {
        let fx = Fx::new();
        // Verbatim from the issue.
        let r = fx.sh(&case, "echo hi > out.txt");
        if case.ww() {
            assert!(r.ok(), "[{case}] {r:?}");
            assert_eq!(fx.read(&fx.ws.join("out.txt")).as_deref(), Some("hi\n"));
        } else {
            assert!(!r.ok(), "[{case}] {r:?}");
            assert!(!fx.ws.join("out.txt").exists());
        }
        let r = fx.sh(&case, "echo hi > ~/x");
        assert!(!r.ok(), "[{case}] {r:?}");
        assert!(!fx.home.join("x").exists(), "[{case}] ~/x was created");
        // Positive control: unsandboxed, the same write lands.
        assert!(fx.unsandboxed("echo hi > ~/x").ok());
        assert!(fx.home.join("x").exists());
        let r = fx.sh(&case, "cat ~/.ssh/id_rsa");
        assert!(!r.ok() && !r.stdout.contains(SSH_MARK), "[{case}] {r:?}");
        assert!(fx
            .unsandboxed("cat ~/.ssh/id_rsa")
            .stdout
            .contains(SSH_MARK));
        // The report says what was in force.
        let e = r.enforcement();
        assert_eq!(e["backend"], case.tier.name, "[{case}] {e}");
        assert_eq!(e["no_new_privs"], true);
        assert_eq!(e["capabilities_dropped"], true);
        assert_eq!(e["seccomp"]["installed"], true);
        // Landlock is applied in both tiers (inside bwrap as defence in
        // depth); this suite needs a kernel with Landlock.
        assert!(
            e["landlock"]["status"] == "fully" || e["landlock"]["status"] == "partially",
            "[{case}] {e}"
        );
        assert_eq!(e["landlock"]["target_abi"], 7, "[{case}] {e}");
    }
}

/// #2: `$HOME`, `/etc`, a sibling of the workspace.
#[test]
fn c02_writes_outside_the_roots_are_denied() {
    for case in cases() {
        let fx = Fx::new();
        let etc = format!("/etc/cw-escape-{}", std::process::id());
        let script = format!(
            "echo x > ../sibling/new.txt; echo x >> ../sibling/target.txt; echo x > {etc}; \
             echo x > \"$HOME/new\"; echo ok > inside.txt"
        );
        let r = fx.sh(&case, &script);
        assert!(!fx.sibling.join("new.txt").exists(), "[{case}] {r:?}");
        assert_eq!(
            fx.read(&fx.sibling.join("target.txt")).as_deref(),
            Some("orig")
        );
        assert!(!std::path::Path::new(&etc).exists(), "[{case}]");
        assert!(!fx.home.join("new").exists(), "[{case}]");
        // Positive control in the same run: the workspace write follows the mode.
        assert_eq!(
            fx.ws.join("inside.txt").exists(),
            case.ww(),
            "[{case}] {r:?}"
        );
        // And unsandboxed the sibling write works.
        assert!(fx.unsandboxed("echo x > ../sibling/new.txt").ok());
        assert!(fx.sibling.join("new.txt").exists());
    }
}

/// #3: shell rc files, also when `$HOME` itself is a writable root.
#[test]
fn c03_shell_rc_files_stay_unchanged() {
    for case in cases() {
        let fx = Fx::new();
        let home = fx.home.to_string_lossy().into_owned();
        for flags in [vec![], vec!["--writable-root", home.as_str()]] {
            let r = fx.run(
                &case,
                &flags,
                &[
                    "sh",
                    "-c",
                    "echo evil >> ~/.bashrc; echo evil >> ~/.profile; echo evil >> ~/.zshrc; \
                     echo evil > ~/.bash_profile; echo ok > ~/notes.txt",
                ],
            );
            // The landlock tier cannot protect files inside a writable root
            // (default `yield`): it must say so, and the test restores them.
            if !case.claims(3) && !flags.is_empty() {
                case.assert_partial(&r, &[".bashrc", "not enforced"]);
                assert!(fx.home.join("notes.txt").exists(), "[{case}] {r:?}");
                fs::write(fx.home.join(".bashrc"), RC_MARK).unwrap();
                fs::write(fx.home.join(".profile"), "# profile\n").unwrap();
                fs::write(fx.home.join(".zshrc"), "# zshrc\n").unwrap();
                let _ = fs::remove_file(fx.home.join(".bash_profile"));
                let _ = fs::remove_file(fx.home.join("notes.txt"));
                continue;
            }
            assert_eq!(fx.read(&fx.home.join(".bashrc")).as_deref(), Some(RC_MARK));
            assert_eq!(
                fx.read(&fx.home.join(".profile")).as_deref(),
                Some("# profile\n")
            );
            assert_eq!(
                fx.read(&fx.home.join(".zshrc")).as_deref(),
                Some("# zshrc\n")
            );
            assert!(
                !fx.home.join(".bash_profile").exists(),
                "[{case}] {flags:?}"
            );
            // Positive control: with $HOME writable (WW), other files there are.
            let writable_home = case.ww() && !flags.is_empty();
            assert_eq!(
                fx.home.join("notes.txt").exists(),
                writable_home,
                "[{case}] {flags:?} {r:?}"
            );
            let _ = fs::remove_file(fx.home.join("notes.txt"));
        }
    }
}

/// #4: git hooks and config are protected; objects, refs and index are not.
#[test]
fn c04_git_metadata_is_protected_but_commits_work() {
    for case in cases() {
        let fx = Fx::new();
        let config_before = fx.read(&fx.ws.join(".git/config"));
        // The commit goes into an existing subdirectory: in the landlock
        // tier entries created directly in the workspace root are not
        // readable while `.env` there is kept unreadable (asserted below).
        fs::create_dir_all(fx.ws.join("sub")).unwrap();
        let r = fx.sh(
            &case,
            "echo evil > .git/hooks/pre-commit; git config core.hooksPath /tmp/h; \
             git config core.fsmonitor evil; echo '[alias] x = !evil' >> .git/config; \
             touch sub/new.txt && git add sub/new.txt && \
             git -c user.name=s -c user.email=s@s commit -qm sandboxed && echo COMMITTED",
        );
        if !case.claims(4) {
            case.assert_partial(&r, &[".git/hooks", "not enforced"]);
            case.assert_partial(&r, &[".git/config", "not enforced"]);
            // The root `.env`: masked by a mount (the tier's default), or,
            // in the carve+opener fallback (the test seam
            // CODEWHALE_TEST_LANDLOCK_NO_MASK=1), carved and reported.
            let no_mask = std::env::var("CODEWHALE_TEST_LANDLOCK_NO_MASK").is_ok_and(|v| v == "1");
            if case.ww() && no_mask {
                assert_eq!(r.enforcement()["deny_read_strategy"], "carve+opener");
                case.assert_partial(&r, &[".env", "over-restricted"]);
            } else if case.ww() {
                assert_eq!(r.enforcement()["deny_read_strategy"], "mask", "[{case}]");
            } else {
                case.assert_partial(&r, &[".env", "over-restricted"]);
            }
            assert!(r.stdout.contains("COMMITTED"), "[{case}] {r:?}");
            continue;
        }
        assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "[{case}]");
        assert_eq!(
            fx.read(&fx.ws.join(".git/config")),
            config_before,
            "[{case}]"
        );
        // Positive control: a commit works in workspace-write (objects, refs, index).
        let log = fx.git(&fx.ws, &["log", "--oneline"]);
        assert_eq!(log.contains("sandboxed"), case.ww(), "[{case}] {log} {r:?}");
        assert_eq!(r.stdout.contains("COMMITTED"), case.ww());
    }
}

/// #5: a `.git` pointer file (worktree) and its target's hooks/config.
#[test]
fn c05_git_worktree_pointer_and_target_are_protected() {
    for case in cases() {
        let fx = Fx::new();
        let wt = fx.root.join("wt");
        fx.git(&fx.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        let pointer = fx.read(&wt.join(".git"));
        let main_config = fx.read(&fx.ws.join(".git/config"));
        let mut c = fx.command(
            &case,
            &[],
            &[
                "sh",
                "-c",
                "echo 'gitdir: /tmp/evil' > .git; gitdir=$(sed 's/gitdir: //' .git); \
                 echo evil > \"$gitdir/../../hooks/pre-commit\"; \
                 echo '[core] fsmonitor = evil' >> \"$gitdir/../../config\"; echo ok > wt-file",
            ],
        );
        let args: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
        // Same command, but rooted at the worktree.
        let mut c2 = std::process::Command::new(BIN);
        let ci = args.iter().position(|a| a == "-C").unwrap();
        let mut args2 = args.clone();
        args2[ci + 1] = wt.clone().into_os_string();
        c2.args(&args2).current_dir(&wt).env("HOME", &fx.home);
        c = c2;
        let out = c.output().unwrap();
        assert_ne!(out.status.code(), Some(125), "[{case}] {out:?}");
        if !case.claims(5) {
            assert_eq!(wt.join("wt-file").exists(), case.ww(), "[{case}] {out:?}");
            let r = fx.run(&case, &[], &["true"]);
            case.assert_partial(&r, &[".git/config", "not enforced"]);
            continue;
        }
        assert_eq!(fx.read(&wt.join(".git")), pointer, "[{case}]");
        assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "[{case}]");
        assert_eq!(fx.read(&fx.ws.join(".git/config")), main_config, "[{case}]");
        assert_eq!(wt.join("wt-file").exists(), case.ww(), "[{case}] {out:?}");
    }
}

/// #6, #7: project override and host-executed config files.
#[test]
fn c06_c07_agent_and_editor_config_is_protected() {
    for case in cases() {
        let fx = Fx::new();
        fs::create_dir_all(fx.ws.join(".vscode")).unwrap();
        fs::write(fx.ws.join(".vscode/settings.json"), "{}").unwrap();
        fs::write(fx.ws.join(".mcp.json"), "{}").unwrap();
        let r = fx.sh(
            &case,
            "mkdir -p .codewhale; echo 'sandbox=\"danger-full-access\"' > .codewhale/config.toml; \
             echo evil > .envrc; echo evil > .vscode/tasks.json; echo evil > .mcp.json; \
             echo '[submodule]' > .gitmodules; echo ok > other.json",
        );
        if !case.claims(6) || !case.claims(7) {
            for p in [
                ".codewhale",
                ".envrc",
                ".vscode",
                ".mcp.json",
                ".gitmodules",
            ] {
                case.assert_partial(&r, &[p, "not enforced"]);
            }
            assert!(fx.ws.join("other.json").exists(), "[{case}] {r:?}");
            continue;
        }
        assert!(!fx.ws.join(".codewhale").exists(), "[{case}] {r:?}");
        assert!(!fx.ws.join(".envrc").exists(), "[{case}]");
        assert!(!fx.ws.join(".vscode/tasks.json").exists(), "[{case}]");
        assert!(!fx.ws.join(".gitmodules").exists(), "[{case}]");
        assert_eq!(fx.read(&fx.ws.join(".mcp.json")).as_deref(), Some("{}"));
        assert_eq!(
            fx.ws.join("other.json").exists(),
            case.ww(),
            "[{case}] {r:?}"
        );
        // No placeholder litter is left behind after the run.
        let names: Vec<_> = fs::read_dir(&fx.ws)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for litter in [".bashrc", ".zshrc", ".deepseek", ".gitconfig"] {
            assert!(
                !names.iter().any(|n| n == litter),
                "[{case}] litter {litter}: {names:?}"
            );
        }
    }
}

/// #8: a symlink out of the workspace does not carry writes out.
#[test]
fn c08_symlink_out_of_the_workspace() {
    for case in cases() {
        let fx = Fx::new();
        let r = fx.sh(
            &case,
            "ln -s ../sibling/target.txt link; echo evil > link; \
             ln -s ../sibling/fresh.txt link2; echo evil > link2",
        );
        assert_eq!(
            fx.read(&fx.sibling.join("target.txt")).as_deref(),
            Some("orig"),
            "[{case}] {r:?}"
        );
        assert!(!fx.sibling.join("fresh.txt").exists(), "[{case}]");
        // The link itself follows the mode (may exist in WW).
        assert_eq!(fx.ws.join("link").symlink_metadata().is_ok(), case.ww());
    }
}

/// #9: a protected path that is a symlink to a decoy before the start.
#[test]
fn c09_symlinked_protected_path_is_refused_or_harmless() {
    for case in cases() {
        let fx = Fx::new();
        fs::write(fx.root.join("decoy"), "decoy").unwrap();
        std::os::unix::fs::symlink(fx.root.join("decoy"), fx.ws.join(".envrc")).unwrap();
        let r = fx.run_raw(
            &case,
            &[],
            &[
                "sh",
                "-c",
                "echo evil > .envrc; rm -f .envrc; echo evil > .envrc; echo RAN",
            ],
        );
        // Item 8 holds in every tier: the decoy outside is never written.
        assert_eq!(fx.read(&fx.root.join("decoy")).as_deref(), Some("decoy"));
        if !case.claims(9) {
            // No refusal: the link is replaced by a file in the workspace.
            case.assert_partial(&r, &[".envrc", "not enforced"]);
            assert!(r.stdout.contains("RAN"), "[{case}] {r:?}");
            continue;
        }
        if case.ww() {
            assert_eq!(r.code, 125, "[{case}] {r:?}");
            assert!(r.stderr.contains("symlink"), "[{case}] {}", r.stderr);
            assert!(!r.stdout.contains("RAN"));
        } else {
            assert!(r.stdout.contains("RAN"), "[{case}] {r:?}");
        }
        assert_eq!(fx.read(&fx.root.join("decoy")).as_deref(), Some("decoy"));
        assert!(fx
            .ws
            .join(".envrc")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        // Positive control: without the link the same policy runs.
        fs::remove_file(fx.ws.join(".envrc")).unwrap();
        assert!(fx.sh(&case, "true").ok(), "[{case}]");
    }
}

/// #10: protected paths that do not exist yet cannot be created.
#[test]
fn c10_missing_protected_paths_cannot_be_created() {
    for case in cases() {
        let fx = Fx::new();
        fs::remove_dir_all(fx.ws.join(".git/hooks")).unwrap();
        let r = fx.sh(
            &case,
            "mkdir .git/hooks; touch .envrc; mkdir .vscode; mkdir newdir",
        );
        if !case.claims(10) {
            case.assert_partial(&r, &[".envrc", "not enforced"]);
            case.assert_partial(&r, &[".vscode", "not enforced"]);
            assert!(fx.ws.join("newdir").exists(), "[{case}] {r:?}");
            continue;
        }
        assert!(!fx.ws.join(".git/hooks").exists(), "[{case}] {r:?}");
        assert!(!fx.ws.join(".envrc").exists(), "[{case}]");
        assert!(!fx.ws.join(".vscode").exists(), "[{case}]");
        assert_eq!(fx.ws.join("newdir").exists(), case.ww(), "[{case}] {r:?}");
    }
}

/// #11: move an ancestor of a protected path away, write, move back.
#[test]
fn c11_moving_an_ancestor_away_fails() {
    for case in cases() {
        let fx = Fx::new();
        fs::create_dir_all(fx.ws.join("plain")).unwrap();
        if !case.claims(11) {
            // Moving .git away works here; only the report is checked.
            let r = fx.sh(&case, "mv plain plain-moved");
            case.assert_partial(&r, &[".git/hooks", "not enforced"]);
            assert!(fx.ws.join("plain-moved").exists(), "[{case}] {r:?}");
            continue;
        }
        let r = fx.sh(
            &case,
            "mv .git .git-away && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; \
             mv .git/hooks .git/hooks-away; mv plain plain-moved",
        );
        assert!(fx.ws.join(".git/HEAD").exists(), "[{case}] {r:?}");
        assert!(!fx.ws.join(".git-away").exists(), "[{case}]");
        assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "[{case}]");
        assert!(fx.ws.join(".git/hooks").is_dir(), "[{case}]");
        // Positive control: an ordinary directory moves in workspace-write.
        assert_eq!(
            fx.ws.join("plain-moved").exists(),
            case.ww(),
            "[{case}] {r:?}"
        );
    }
}

/// #12: hard links from outside the workspace cannot be written.
#[test]
fn c12_hard_link_from_outside() {
    for case in cases() {
        let fx = Fx::new();
        let r = fx.sh(
            &case,
            "ln ../sibling/target.txt hl && echo evil >> hl; ln /etc/passwd pw && echo evil >> pw",
        );
        assert_eq!(
            fx.read(&fx.sibling.join("target.txt")).as_deref(),
            Some("orig"),
            "[{case}] {r:?}"
        );
        assert!(
            !fx.ws.join("hl").exists() && !fx.ws.join("pw").exists(),
            "[{case}]"
        );
        // Positive control: unsandboxed the hard link works (same filesystem).
        let c = fx.unsandboxed("ln ../sibling/target.txt hl && echo linked");
        assert!(c.stdout.contains("linked"), "{c:?}");
        fs::remove_file(fx.ws.join("hl")).unwrap();
    }
}

/// #15, #16: deny-read paths, including the agent's own key store.
#[test]
fn c15_c16_secrets_are_unreadable() {
    for case in cases() {
        let fx = Fx::new();
        let script = "cat ~/.ssh/id_rsa ~/.aws/credentials ~/.config/gh/hosts.yml ~/.netrc \
                      ~/.codewhale/auth.json .env; ls ~/.ssh; cat ~/.bashrc .env.example";
        let r = fx.sh(&case, script);
        for mark in [
            SSH_MARK,
            AWS_MARK,
            GH_MARK,
            NETRC_MARK,
            AGENT_MARK,
            DOTENV_MARK,
        ] {
            assert!(
                !r.stdout.contains(mark),
                "[{case}] {mark} leaked: {}",
                r.stdout
            );
        }
        if case.claims(16) {
            assert!(
                !r.stdout.contains("id_rsa"),
                "[{case}] directory listing leaked"
            );
        } else {
            // Contents stay unreadable (above); names are listable, and
            // the report says so.
            case.assert_partial(&r, &["can be listed"]);
        }
        // Positive controls: allowed reads work in the same run, and every
        // secret is readable without the sandbox.
        assert!(r.stdout.contains(RC_MARK), "[{case}] {r:?}");
        assert!(r.stdout.contains("EXAMPLE-VISIBLE"), "[{case}]");
        let c = fx.unsandboxed(script);
        for mark in [
            SSH_MARK,
            AWS_MARK,
            GH_MARK,
            NETRC_MARK,
            AGENT_MARK,
            DOTENV_MARK,
        ] {
            assert!(c.stdout.contains(mark), "control lacks {mark}");
        }
        let masked = r.enforcement()["masked_paths"].to_string();
        assert!(
            masked.contains(".ssh") && masked.contains(".env"),
            "[{case}] {masked}"
        );
        if !case.tier.namespaces {
            // No mask to replace without a mount namespace: removing and
            // recreating a carved file in the workspace is possible (it
            // leaks nothing); reading it stays impossible.
            continue;
        }
        // In WW the masks also cannot be replaced.
        let r = fx.sh(&case, "rm -f .env; echo replaced > .env");
        assert_eq!(
            fx.read(&fx.ws.join(".env")).as_deref(),
            Some(DOTENV_MARK),
            "[{case}] {r:?}"
        );
    }
}

/// #35: `/dev/shm` and other world-writable directories outside the roots.
#[test]
fn c35_world_writable_dirs_do_not_reach_the_host() {
    for case in cases() {
        let fx = Fx::new();
        let name = format!(
            "cw-escape-{}-{}",
            std::process::id(),
            fx.root.file_name().unwrap().to_string_lossy()
        );
        // Without a mount namespace there is no private /tmp: the per-run
        // $TMPDIR is the positive control there.
        let tmp = if case.tier.namespaces {
            "/tmp"
        } else {
            "$TMPDIR"
        };
        let r = fx.sh(
            &case,
            &format!("echo x > /dev/shm/{name}; echo x > /var/tmp/{name}; echo x > /tmp/{name}; echo x > {tmp}/{name} && cat {tmp}/{name}"),
        );
        if !case.tier.namespaces {
            case.assert_partial(&r, &["/tmp", "TMPDIR"]);
        }
        assert!(
            !std::path::Path::new(&format!("/dev/shm/{name}")).exists(),
            "[{case}]"
        );
        assert!(
            !std::path::Path::new(&format!("/var/tmp/{name}")).exists(),
            "[{case}]"
        );
        assert!(
            !std::path::Path::new(&format!("/tmp/{name}")).exists(),
            "[{case}]"
        );
        // Positive control: the private /tmp is writable inside.
        assert!(r.stdout.contains('x'), "[{case}] {r:?}");
    }
}

/// #38: path tricks.
#[test]
fn c38_path_tricks() {
    for case in cases() {
        let fx = Fx::new();
        let before_home: Vec<_> = fs::read_dir(&fx.home)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let r = fx.run(
            &case,
            &[],
            &[
                "bash",
                "-c",
                "echo x > ../ws/../sibling/./t1; echo x > //\"$HOME\"//t2; echo x > \"$HOME/./t3/.\"; \
                 echo x > \"$HOME/$(printf '\\377\\376')\"; echo x > \"$HOME/new
line\"; echo x > ./.git/../.envrc; echo x > \"$(printf 'ok\\377')\"",
            ],
        );
        let after_home: Vec<_> = fs::read_dir(&fx.home)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            before_home.len(),
            after_home.len(),
            "[{case}] {after_home:?} {r:?}"
        );
        assert!(!fx.sibling.join("t1").exists(), "[{case}]");
        if case.claims(10) {
            assert!(!fx.ws.join(".envrc").exists(), "[{case}]");
        } else {
            case.assert_partial(&r, &[".envrc", "not enforced"]);
        }
        // Positive control: a non-UTF-8 name inside the workspace (WW).
        use std::os::unix::ffi::OsStrExt;
        let odd = fx.ws.join(std::ffi::OsStr::from_bytes(b"ok\xff"));
        assert_eq!(odd.exists(), case.ww(), "[{case}] {r:?}");
    }
}

/// A `$CODEWHALE_HOME` outside `~/.codewhale` (where a user keeps keys,
/// sessions and snapshots) is as unreadable to a command as
/// `~/.codewhale` is. Positive control: the same bytes in a sibling
/// directory are readable, and with `CODEWHALE_HOME` pointing elsewhere
/// the file itself is.
#[test]
fn a_custom_codewhale_home_is_unreadable() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (home, state, other, ws, tmp, xdg) = (
        root.path().join("home"),
        root.path().join("state"),
        root.path().join("other"),
        root.path().join("ws"),
        root.path().join("tmp"),
        root.path().join("xdg"),
    );
    for d in [&home, &state, &other, &ws, &tmp, &xdg] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(state.join("auth.json"), "STATE-SECRET\n").unwrap();
    std::fs::write(other.join("auth.json"), "STATE-SECRET\n").unwrap();
    let cat = |cw_home: &std::path::Path, file: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_codewhale"))
            .args(["sandbox", "run", "-C"])
            .arg(&ws)
            .arg("--")
            .arg("cat")
            .arg(file)
            .env("HOME", &home)
            .env("CODEWHALE_HOME", cw_home)
            .env("TMPDIR", &tmp)
            .env("XDG_RUNTIME_DIR", &xdg)
            .env("GIT_CEILING_DIRECTORIES", root.path())
            .output()
            .unwrap()
    };
    let denied = cat(&state, &state.join("auth.json"));
    assert!(
        !String::from_utf8_lossy(&denied.stdout).contains("STATE-SECRET"),
        "the state home was readable: {denied:?}"
    );
    assert!(!denied.status.success(), "{denied:?}");
    // Controls: the same content elsewhere, and the file when the state
    // home is another directory.
    let sibling = cat(&state, &other.join("auth.json"));
    assert!(
        String::from_utf8_lossy(&sibling.stdout).contains("STATE-SECRET"),
        "{sibling:?}"
    );
    let elsewhere = cat(&other.join("cw"), &state.join("auth.json"));
    assert!(
        String::from_utf8_lossy(&elsewhere.stdout).contains("STATE-SECRET"),
        "{elsewhere:?}"
    );
}
