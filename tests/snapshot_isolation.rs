#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The user's repository is never touched and secrets never enter the side
//! repository — even with hostile `GIT_*` variables, a global config that
//! sets a hooks path, hooks and an fsmonitor in the user's repo, and a
//! `.gitignore` that tries to re-include `.env`.
//!
//! One test in its own binary: it sets process-wide environment variables.
#![cfg(unix)]

mod common;

use codewhale::snapshot::{Label, SnapshotMeta, UndoScope};
use common::snapshots::{contains, manifest, Fixture};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const SECRETS: &[&str] = &[
    "SECRET-ENV-VALUE-1",
    "SECRET-ENV-LOCAL-2",
    "SECRET-ENV-TEMPLATE-3",
    "SECRET-DENY-READ-4",
    "SECRET-ENV-DIR-5",
    "SECRET-DENY-DIR-6",
];

fn hook(dir: &Path, name: &str, markers: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\ntouch '{}/{name}-'\"$$\"\nexit 0\n",
            markers.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn user_repo_untouched_and_secrets_never_stored() {
    let f = Fixture::new();
    let markers = f.tmp.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    f.write(
        "src/main.rs",
        "fn main() { println!(\"VISIBLE-MARKER-9\"); }\n",
    );
    f.write(".env", format!("API_KEY={}\n", SECRETS[0]));
    f.write("app/.env.local", format!("TOKEN={}\n", SECRETS[1]));
    f.write(".env.example", format!("EXAMPLE={}\n", SECRETS[2]));
    f.write("creds/token.txt", SECRETS[3]);
    f.write("py/.env/lib/site.py", SECRETS[4]);
    f.write("keys/deep/id.pem", SECRETS[5]);
    f.write(".gitignore", "!.env\n!.env.local\n!.env.example\n!.env/\n");
    f.user_repo();

    // Hostile surroundings: user-repo hooks and fsmonitor, a global config
    // with a hooks path, and GIT_* variables aimed at the user's repo.
    let user_hooks = [
        "post-index-change",
        "reference-transaction",
        "pre-commit",
        "post-checkout",
    ];
    for h in user_hooks {
        hook(&f.ws.join(".git/hooks"), h, &markers);
    }
    hook(&f.tmp.path().join("fsmon"), "fsmonitor", &markers);
    f.user_git(&[
        "config",
        "core.fsmonitor",
        &f.tmp.path().join("fsmon/fsmonitor").display().to_string(),
    ]);
    let global_hooks = f.tmp.path().join("globalhooks");
    for h in user_hooks {
        hook(&global_hooks, h, &markers);
    }
    std::fs::write(
        f.user_home.join(".gitconfig"),
        format!("[core]\n\thooksPath = {}\n", global_hooks.display()),
    )
    .unwrap();
    let user_git_dir = f.ws.join(".git");
    std::env::set_var("HOME", &f.user_home);
    std::env::set_var("GIT_DIR", &user_git_dir);
    std::env::set_var("GIT_WORK_TREE", &f.ws);
    std::env::set_var("GIT_INDEX_FILE", user_git_dir.join("index"));
    std::env::set_var("GIT_OBJECT_DIRECTORY", user_git_dir.join("objects"));
    std::env::set_var(
        "GIT_CONFIG_PARAMETERS",
        format!("'core.hookspath'='{}'", global_hooks.display()),
    );
    let git_before = manifest(&user_git_dir, &[]);
    let secrets_before: Vec<_> = [
        ".env",
        "app/.env.local",
        ".env.example",
        "creds/token.txt",
        "py/.env/lib/site.py",
    ]
    .iter()
    .map(|p| std::fs::read(f.ws.join(p)).unwrap())
    .collect();

    let mut opts = f.opts();
    opts.deny_read = vec![f.ws.join("creds/token.txt"), f.ws.join("keys")];
    let mut store = f.open_with(opts);
    let meta = SnapshotMeta {
        session_id: Some("s".into()),
        request: Some(1),
        ..Default::default()
    };
    store.snapshot(Label::PreTurn(1), meta.clone()).unwrap();
    f.write("src/main.rs", "changed\n");
    f.write("new.txt", "new\n");
    f.write(".env", "API_KEY=rotated\n");
    store
        .snapshot(Label::Tool("call_1".into()), meta.clone())
        .unwrap();
    store.snapshot(Label::PostTurn(1), meta).unwrap();
    let undo = store.undo(&UndoScope::Last).unwrap();
    store.restore(undo.restore.pre_restore).unwrap();
    store.restore(undo.plan.target).unwrap();

    for k in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_CONFIG_PARAMETERS",
    ] {
        std::env::remove_var(k);
    }

    // 1. The user's .git is byte-identical and no hook or fsmonitor ran.
    assert!(
        manifest(&user_git_dir, &[]) == git_before,
        "the user's .git changed"
    );
    let fired: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(fired.is_empty(), "hooks ran: {fired:?}");

    // 2. No secret bytes in any side-repo object; the visible marker is there.
    let objects = f.side_objects(&store);
    assert!(
        contains(&objects, "VISIBLE-MARKER-9"),
        "control: object inspection sees content"
    );
    for s in SECRETS {
        assert!(
            !contains(&objects, s),
            "{s} leaked into the side repository"
        );
    }
    // 3. Restores left the secret files alone (the .env edit survives undo).
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".env")).unwrap(),
        "API_KEY=rotated\n"
    );
    for (i, p) in [
        "app/.env.local",
        ".env.example",
        "creds/token.txt",
        "py/.env/lib/site.py",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(
            std::fs::read(f.ws.join(p)).unwrap(),
            secrets_before[i + 1],
            "{p}"
        );
    }
    assert!(!f.ws.join("new.txt").exists());

    // Positive control: the same hostile setup does fire hooks and change
    // .git when git is run the ordinary way, in a copy of the repository.
    let copy = f.tmp.path().join("copy");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&f.ws)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    let copy_before = manifest(&copy.join(".git"), &[]);
    std::fs::write(copy.join("x.txt"), "x").unwrap();
    let out = Command::new("git")
        .args(["add", "-A"])
        .current_dir(&copy)
        .env("HOME", &f.user_home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        manifest(&copy.join(".git"), &[]) != copy_before,
        "control: git add changes .git"
    );
    let fired = std::fs::read_dir(&markers).unwrap().count();
    assert!(
        fired > 0,
        "control: ordinary git runs the global hooks path / fsmonitor"
    );
}
