use super::*;

struct Fx {
    _t: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
}

fn fx() -> Fx {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().join("state");
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    Fx { _t: t, base, ws }
}

fn targets(ws: &Path) -> Vec<Target> {
    [".git/config", ".git/hooks", ".envrc", ".vscode"]
        .iter()
        .map(|p| Target {
            root: ws.to_path_buf(),
            path: ws.join(p),
        })
        .collect()
}

#[test]
fn an_untouched_run_reverts_nothing_and_leaves_no_baseline() {
    let f = fx();
    let g = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::write(f.ws.join("ordinary.txt"), "x").unwrap();
    assert!(g.leave().is_empty());
    assert!(pending_in(&f.base).is_empty());
    assert!(!f.base.join("runs").join(key(&f.ws)).join(BASELINE).exists());
    assert!(f.ws.join("ordinary.txt").exists());
}

#[test]
fn created_and_changed_paths_are_quarantined_and_restored() {
    let f = fx();
    let g = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::write(f.ws.join(".envrc"), "evil").unwrap();
    std::fs::write(f.ws.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
    std::fs::write(f.ws.join(".git/hooks/pre-commit"), "evil").unwrap();
    let r = g.leave();
    let paths: Vec<_> = r.iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        vec![
            f.ws.join(".git/config"),
            f.ws.join(".git/hooks"),
            f.ws.join(".envrc")
        ],
        "{r:?}"
    );
    assert!(!f.ws.join(".envrc").exists());
    assert!(!f.ws.join(".git/hooks/pre-commit").exists());
    assert!(f.ws.join(".git/hooks/pre-commit.sample").exists());
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // Nothing is lost: the new versions are in the quarantine.
    let q = r[2].quarantined_to.clone().unwrap();
    assert!(q.starts_with(f.base.join("quarantine")));
    assert_eq!(std::fs::read_to_string(q).unwrap(), "evil");
    assert_eq!(r[0].action, RevertAction::Restored);
    assert_eq!(r[2].action, RevertAction::Removed);
}

#[test]
fn rename_and_recreate_of_git_is_undone() {
    let f = fx();
    let g = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::rename(f.ws.join(".git"), f.ws.join(".git2")).unwrap();
    std::fs::create_dir_all(f.ws.join(".git/hooks")).unwrap();
    std::fs::write(f.ws.join(".git/hooks/post-checkout"), "evil").unwrap();
    std::fs::write(f.ws.join(".git/config"), "evil").unwrap();
    let r = g.leave();
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!f.ws.join(".git/hooks/post-checkout").exists());
}

#[test]
fn a_symlinked_git_is_moved_away() {
    let f = fx();
    let g = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::rename(f.ws.join(".git"), f.ws.join("real-git")).unwrap();
    std::os::unix::fs::symlink(f.ws.join("real-git"), f.ws.join(".git")).unwrap();
    let r = g.leave();
    assert!(
        r.iter()
            .any(|r| r.path == f.ws.join(".git") && r.action == RevertAction::Removed),
        "{r:?}"
    );
    assert!(!f.ws.join(".git").is_symlink());
}

#[test]
fn a_dead_runs_baseline_is_recovered_by_the_next_command() {
    let f = fx();
    let g = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::write(f.ws.join(".envrc"), "evil").unwrap();
    // While the run is alive nothing is touched.
    assert!(recover_in(&f.base).is_empty());
    assert!(f.ws.join(".envrc").exists());
    // The run dies without leaving: its lock goes with it.
    drop(g);
    assert_eq!(pending_in(&f.base), vec![f.ws.clone()]);
    let rec = recover_in(&f.base);
    assert_eq!(rec.len(), 1, "{rec:?}");
    assert!(rec[0].1.iter().all(|r| r.earlier_run));
    assert!(!f.ws.join(".envrc").exists());
    assert!(pending_in(&f.base).is_empty());
}

#[test]
fn a_concurrent_run_does_not_adopt_an_earlier_runs_write() {
    let f = fx();
    let a = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    std::fs::write(f.ws.join(".envrc"), "evil").unwrap();
    let b = RunGuard::enter_in(&f.base, &f.ws, &targets(&f.ws)).unwrap();
    assert!(b.recovered.is_empty());
    // b leaves first: the shared baseline still says "missing".
    assert_eq!(b.leave().len(), 1);
    assert!(!f.ws.join(".envrc").exists());
    assert!(a.leave().is_empty());
    assert!(pending_in(&f.base).is_empty());
}
