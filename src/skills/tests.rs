//! Discovery, shadowing, state and the prompt listing on real folders.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::fs;

fn skill(root: &Path, name: &str, desc: &str) -> PathBuf {
    let d = root.join(name);
    fs::create_dir_all(&d).unwrap();
    fs::write(
        d.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {desc}\n---\nBody of {name}.\n"),
    )
    .unwrap();
    d
}

struct Env {
    _t: tempfile::TempDir,
    paths: ConfigPaths,
    ws: PathBuf,
}

fn env() -> Env {
    let t = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(t.path()).unwrap();
    let home = base.join("home");
    let ws = base.join("ws");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&ws).unwrap();
    let paths = ConfigPaths::from_parts(Some(home), None, None);
    Env { _t: t, paths, ws }
}

#[test]
fn first_root_wins_and_duplicates_are_reported() {
    let e = env();
    let global = e.paths.codewhale_home.join("skills");
    skill(&global, "deploy", "global deploy");
    skill(&e.ws.join(".claude/skills"), "deploy", "repo deploy");
    skill(&e.ws.join(".claude/skills"), "lint", "repo lint");
    skill(&e.ws.join("skills"), "lint", "local lint");
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    let l = s.listed();
    let names: Vec<(&str, &str)> = l.iter().map(|x| (x.name.as_str(), x.root)).collect();
    assert_eq!(
        names,
        vec![
            ("deploy", "global"),
            ("lint", "local"),
            ("deploy", "claude"),
            ("lint", "claude")
        ]
    );
    assert_eq!(s.get("deploy").unwrap().description, "global deploy");
    assert_eq!(s.get("lint").unwrap().description, "local lint");
    assert_eq!(l[2].shadowed_by, Some(global.join("deploy/SKILL.md")));
    assert_eq!(l[3].shadowed_by, Some(e.ws.join("skills/lint/SKILL.md")));
    let (key, claude) = &s.discovery.roots[5];
    assert_eq!(*key, "claude");
    assert!(claude.present);
    assert_eq!(claude.count, 2);
    let (key, opencode) = &s.discovery.roots[6];
    assert_eq!(*key, "opencode");
    assert!(!opencode.present);
}

#[test]
fn bad_skills_are_problems_not_skills() {
    let e = env();
    let root = e.ws.join(".agents/skills");
    fs::create_dir_all(root.join("nofront")).unwrap();
    fs::write(root.join("nofront/SKILL.md"), "just text").unwrap();
    let d = skill(&root, "x", "d");
    fs::rename(&d, root.join("renamed")).unwrap();
    fs::create_dir_all(root.join("empty")).unwrap();
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    assert!(s.listed().is_empty());
    assert_eq!(s.discovery.problems.len(), 2, "{:?}", s.discovery.problems);
    assert!(s.discovery.problems[1]
        .error
        .contains("does not match its folder"));
}

#[cfg(unix)]
#[test]
fn a_workspace_skill_linking_out_is_not_read() {
    let e = env();
    let outside = e.ws.parent().unwrap().join("outside");
    skill(&outside, "leak", "from outside");
    let root = e.ws.join(".codewhale/skills");
    fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(outside.join("leak"), root.join("leak")).unwrap();
    // A user root may link anywhere: it is the user's own.
    let global = e.paths.codewhale_home.join("skills");
    fs::create_dir_all(&global).unwrap();
    skill(&outside, "mine", "linked by the user");
    std::os::unix::fs::symlink(outside.join("mine"), global.join("mine")).unwrap();
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    assert!(s.get("leak").is_none());
    assert!(s.get("mine").is_some());
    assert!(s.discovery.problems[0]
        .error
        .contains("outside the workspace"));
}

#[test]
fn disabled_skills_are_listed_but_not_usable() {
    let e = env();
    skill(&e.ws.join("skills"), "a", "A");
    skill(&e.ws.join("skills"), "b", "B");
    StateStore::new(&e.paths.codewhale_home)
        .set("a", false)
        .unwrap();
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    assert!(!s.listed()[0].enabled);
    assert!(s.get("a").is_none());
    let usable: Vec<_> = s.usable().map(|s| s.name.as_str()).collect();
    assert_eq!(usable, vec!["b"]);
}

#[test]
fn listing_is_names_and_descriptions_within_the_cap() {
    let e = env();
    for i in 0..200 {
        skill(
            &e.ws.join("skills"),
            &format!("s{i:03}"),
            &"word ".repeat(20),
        );
    }
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    let (text, info) = listing::section(s.usable());
    assert!(text.len() <= listing::LISTING_CAP, "{}", text.len());
    assert!(info.truncated && info.omitted > 0);
    assert_eq!(info.listed.len() + info.omitted, 200);
    assert!(text.contains(&format!("{} more skills not listed", info.omitted)));
    assert!(!text.contains("Body of"), "bodies are not listed");
    let (none, info) = listing::section(std::iter::empty());
    assert!(none.is_empty() && !info.truncated);
}

#[test]
fn answer_has_the_body_and_the_files() {
    let e = env();
    let d = skill(&e.ws.join("skills"), "pdf", "PDFs");
    fs::create_dir_all(d.join("scripts")).unwrap();
    fs::write(d.join("scripts/fill.py"), "print()").unwrap();
    fs::write(
        d.join("SKILL.md"),
        "---\nname: pdf\ndescription: PDFs\nallowed-tools: read_file shell web_fetch\n---\nDo it.\n",
    )
    .unwrap();
    let s = Skills::load(&e.paths, &e.ws).unwrap();
    let sk = s.get("pdf").unwrap();
    let text = fs::read_to_string(&sk.file).unwrap();
    let a = load::answer(sk, &text);
    assert!(a.contains("Do it."));
    assert!(
        !a.contains("description: PDFs"),
        "front matter is not repeated"
    );
    assert!(a.contains("- scripts/fill.py"));
    assert!(
        a.contains("`allowed-tools` read_file, shell, web_fetch; a skill never widens"),
        "{a}"
    );
}
