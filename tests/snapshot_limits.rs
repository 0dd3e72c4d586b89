#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Refusals: roots, homes, the store itself, over-limit workspaces, no git.
//! Each refusal has a positive control that the same setup works when the
//! condition is lifted, and checks that no store was created.
#![cfg(unix)]

mod common;

use codewhale::snapshot::{Disabled, Opened, SnapshotOptions, SnapshotStore};
use common::snapshots::Fixture;
use std::path::Path;

fn disabled(ws: &Path, opts: SnapshotOptions) -> Disabled {
    match SnapshotStore::open(ws, opts).unwrap() {
        Opened::Disabled(d) => d,
        Opened::Ready(_) => panic!("{} should have been refused", ws.display()),
    }
}

#[test]
fn refuses_root_homes_and_the_store_itself() {
    let f = Fixture::new();
    let d = disabled(Path::new("/"), f.opts());
    assert!(matches!(d, Disabled::RefusedPath { .. }), "{d}");
    assert!(d.to_string().contains("filesystem root"), "{d}");

    let d = disabled(&f.user_home, f.opts());
    assert!(d.to_string().contains("your home directory"), "{d}");
    let d = disabled(f.tmp.path(), f.opts());
    assert!(
        d.to_string().contains("contains your home directory"),
        "{d}"
    );

    let inside = f.home.join("project");
    std::fs::create_dir_all(&inside).unwrap();
    let d = disabled(&inside, f.opts());
    assert!(d.to_string().contains("codewhale's own state"), "{d}");
    assert!(
        !f.home.join("snapshots").exists(),
        "a refused open creates no store"
    );

    // Positive control: an ordinary project directory is accepted.
    f.write("ok.txt", "x");
    let _ = f.open();
    assert!(f.home.join("snapshots").exists());
}

#[test]
fn refuses_over_entry_and_size_limits_counting_after_ignores() {
    let f = Fixture::new();
    for i in 0..30 {
        f.write(&format!("many/{i:02}.txt"), "x");
    }
    let mut opts = f.opts();
    opts.max_workspace_entries = 20;
    let d = disabled(&f.ws, opts.clone());
    assert!(
        matches!(d, Disabled::TooManyEntries { limit: 20, .. }),
        "{d}"
    );
    let msg = d.to_string();
    assert!(
        msg.contains("more than 20") && msg.contains("max_workspace_entries"),
        "{msg}"
    );
    assert!(!f.home.join("snapshots").exists());

    // Control: ignoring the directory brings it under the limit.
    f.write(".gitignore", "many/\n");
    let _ = f.open_with(opts);

    f.write("big1.bin", vec![7u8; 1024 * 1024]);
    f.write("big2.bin", vec![7u8; 1024 * 1024]);
    let mut opts = f.opts();
    opts.max_workspace_bytes = 1024 * 1024 + 100;
    let d = disabled(&f.ws, opts.clone());
    assert!(matches!(d, Disabled::TooLarge { limit_mb: 1, .. }), "{d}");
    assert!(d.to_string().contains("max_workspace_mb"), "{d}");
    // Built-in excludes count as ignored: move one into node_modules.
    std::fs::create_dir_all(f.ws.join("node_modules")).unwrap();
    std::fs::rename(f.ws.join("big2.bin"), f.ws.join("node_modules/big2.bin")).unwrap();
    let _ = f.open_with(opts);
}

#[test]
fn missing_git_disables_with_a_reason() {
    let f = Fixture::new();
    let mut opts = f.opts();
    opts.git = Some(f.tmp.path().join("no-such-git"));
    let d = disabled(&f.ws, opts);
    assert!(matches!(d, Disabled::GitMissing { .. }), "{d}");
    assert!(d.to_string().contains("install git"), "{d}");
}
