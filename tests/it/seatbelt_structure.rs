#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Structural and security-critical checks of every Seatbelt profile in the
//! matrix, plus an end-to-end plan from a real `resolve()` on a temp tree.

use crate::common;

use codewhale::host::seatbelt::sexp::{self, Sexp};
use codewhale::host::seatbelt::{self, profile_with, DarwinHost, SeatbeltProfile};
use codewhale::policy::{self, HostFacts, SandboxMode, SandboxPolicy};
use common::seatbelt::{host, matrix, resolved, Cell};
use std::collections::BTreeSet;

fn plan(c: Cell) -> SeatbeltProfile {
    profile_with(&resolved(c), &host()).expect("plan")
}

fn head(f: &Sexp) -> Option<&str> {
    match f {
        Sexp::List(items) => match items.first() {
            Some(Sexp::Atom(a)) => Some(a.as_str()),
            _ => None,
        },
        _ => None,
    }
}

fn atoms(f: &Sexp) -> Vec<&str> {
    match f {
        Sexp::List(items) => items
            .iter()
            .filter_map(|i| match i {
                Sexp::Atom(a) => Some(a.as_str()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn filters(f: &Sexp) -> Vec<&Sexp> {
    match f {
        Sexp::List(items) => items
            .iter()
            .filter(|i| matches!(i, Sexp::List(_)))
            .collect(),
        _ => Vec::new(),
    }
}

fn mentions_param(f: &Sexp) -> bool {
    !sexp::params_used(std::slice::from_ref(f)).is_empty()
}

#[test]
fn every_profile_parses_and_params_match_both_ways() {
    for c in matrix() {
        let p = plan(c);
        let forms = sexp::parse(&p.text).unwrap_or_else(|e| panic!("{}: {e}", c.name()));
        let used = sexp::params_used(&forms);
        let supplied: BTreeSet<String> = p.params.iter().map(|x| x.name.clone()).collect();
        assert_eq!(used, supplied, "{}: params used vs supplied", c.name());
        assert_eq!(
            supplied.len(),
            p.params.len(),
            "{}: duplicate param",
            c.name()
        );
        // And the -D arguments carry exactly these.
        let args = p.sandbox_exec_args(&["true".into()]);
        assert_eq!(args[0], "-p");
        assert_eq!(args[1], p.text);
        let d: BTreeSet<String> = args
            .iter()
            .filter_map(|a| a.strip_prefix("-D"))
            .filter_map(|a| a.split_once('=').map(|(k, _)| k.to_string()))
            .collect();
        assert_eq!(d, supplied, "{}", c.name());
        assert_eq!(&args[args.len() - 2..], ["--", "true"]);
    }
}

#[test]
fn deny_default_comes_first() {
    for c in matrix() {
        let forms = sexp::parse(&plan(c).text).expect("parse");
        assert_eq!(
            forms[0],
            Sexp::List(vec![Sexp::Atom("version".into()), Sexp::Atom("1".into())])
        );
        assert_eq!(
            forms[1],
            Sexp::List(vec![
                Sexp::Atom("deny".into()),
                Sexp::Atom("default".into())
            ])
        );
        // Nothing allows everything.
        for f in &forms {
            assert_ne!(atoms(f), ["allow", "default"], "{}", c.name());
        }
    }
}

#[test]
fn no_blanket_file_write() {
    for c in matrix() {
        let p = plan(c);
        assert!(!p.text.contains("(allow file-write*)"), "{}", c.name());
        let forms = sexp::parse(&p.text).expect("parse");
        for f in &forms {
            if head(f) != Some("allow") || !atoms(f).iter().any(|a| a.starts_with("file-write")) {
                continue;
            }
            let fs = filters(f);
            assert!(!fs.is_empty(), "{}: unfiltered write rule {f:?}", c.name());
            // Either scoped to a parameter, or to a fixed device node.
            let device = p.text.contains("/dev/")
                && fs.iter().all(|x| {
                    let s = format!("{x:?}");
                    s.contains("/dev/")
                });
            assert!(
                fs.iter().all(|x| mentions_param(x)) || device,
                "{}: write rule neither param- nor device-scoped: {f:?}",
                c.name()
            );
        }
    }
}

#[test]
fn deny_read_is_last_and_after_every_allow() {
    for c in matrix() {
        let forms = sexp::parse(&plan(c).text).expect("parse");
        let deny_read: Vec<usize> = forms
            .iter()
            .enumerate()
            .filter(|(_, f)| atoms(f) == ["deny", "file-read*", "file-write*"])
            .map(|(i, _)| i)
            .collect();
        assert_eq!(deny_read.len(), 1, "{}", c.name());
        let last_allow = forms
            .iter()
            .rposition(|f| head(f) == Some("allow"))
            .expect("allows");
        assert!(deny_read[0] > last_allow, "{}", c.name());
        assert_eq!(deny_read[0], forms.len() - 1, "{}", c.name());
    }
}

#[test]
fn no_path_text_inside_the_profile() {
    for c in matrix() {
        let p = plan(c);
        for param in &p.params {
            assert!(
                !p.text.contains(&param.value),
                "{}: {}={} leaks into the text",
                c.name(),
                param.name,
                param.value
            );
        }
        for word in ["/Users", "/Volumes", "/private/var/folders", "proj"] {
            assert!(!p.text.contains(word), "{}: {word}", c.name());
        }
    }
}

#[test]
fn network_rules_only_when_allowed() {
    for c in matrix() {
        let p = plan(c);
        for op in [
            "network-outbound",
            "network-bind",
            "network-inbound",
            "system-socket",
        ] {
            assert_eq!(
                p.text.contains(&format!("(allow {op}")),
                c.network,
                "{}: {op}",
                c.name()
            );
        }
        assert_eq!(p.text.contains("com.apple.trustd.agent"), c.network);
    }
}

#[test]
fn read_only_writes_only_tmp_and_devices() {
    for c in matrix()
        .into_iter()
        .filter(|c| c.mode == SandboxMode::ReadOnly)
    {
        let p = plan(c);
        let names: Vec<&str> = p.params.iter().map(|x| x.name.as_str()).collect();
        assert!(
            names.iter().all(|n| *n == "TMP" || n.starts_with("DR_")),
            "{names:?}"
        );
        assert!(!p.text.contains("WR_"));
    }
}

#[test]
fn workspace_write_protects_children_and_aliases_deny_read() {
    let c = Cell {
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        extra_roots: true,
        deny_read_present: false,
    };
    let p = plan(c);
    let value = |v: &str| {
        p.params
            .iter()
            .find(|x| x.value == v)
            .map(|x| x.name.clone())
    };
    let hooks = value("/Users/dev/proj/.git/hooks").expect("hooks param");
    assert!(p
        .text
        .contains(&format!("(require-not (subpath (param \"{hooks}\")))")));
    // A missing protected file is a subpath: creating it as file or dir is denied.
    let envrc = value("/Users/dev/proj/.envrc").expect("envrc param");
    assert!(p
        .text
        .contains(&format!("(require-not (subpath (param \"{envrc}\")))")));
    // An existing protected file is a literal.
    let cfg = value("/Users/dev/proj/.git/config").expect("config param");
    assert!(p
        .text
        .contains(&format!("(require-not (literal (param \"{cfg}\")))")));
    // `.git` itself cannot be renamed away and back.
    let dotgit = value("/Users/dev/proj/.git").expect("ancestor param");
    assert!(p
        .text
        .contains(&format!("(require-not (literal (param \"{dotgit}\")))")));
    // Case variants of the table names, anchored at the workspace depth (3).
    assert!(p.text.contains(
        r#"(require-not (regex #"^/[^/]+/[^/]+/[^/]+/\.[gG][iI][tT]/[hH][oO][oO][kK][sS](/.*)?$"))"#
    ));
    // The protected child of the extra root belongs to that root's rule only.
    assert_eq!(p.param("WR_1"), Some("/Volumes/data/out"));
    assert_eq!(p.param("WR_1_P_0"), Some("/Volumes/data/out/.vscode"));
    // Deny-read in both spellings.
    assert!(value("/etc/shadow").is_some() && value("/private/etc/shadow").is_some());
    assert!(value("/private/var/folders/zz/abc123/T/leak.env").is_some());
    assert!(value("/var/folders/zz/abc123/T/leak.env").is_some());
    // The Darwin user cache dir and the private temp dir are writable.
    assert!(value("/private/var/folders/zz/abc123/C").is_some_and(|n| n.starts_with("WR_")));
    assert_eq!(
        p.param("TMP"),
        Some("/private/var/folders/zz/abc123/T/codewhale-run-1")
    );
}

#[test]
fn a_protected_root_is_not_writable() {
    let mut r = resolved(Cell {
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        extra_roots: true,
        deny_read_present: true,
    });
    assert_eq!(r.writable_roots[1].path.to_str(), Some("/Volumes/data/out"));
    r.protected.push(r.writable_roots[1].clone());
    let p = profile_with(&r, &host()).expect("plan");
    assert!(p.params.iter().all(|x| x.value != "/Volumes/data/out"));
    assert!(p.notes.iter().any(|n| n.contains("/Volumes/data/out")));
    // The other roots keep their rules (and numbering stays dense).
    assert_eq!(p.param("WR_0"), Some("/Users/dev/proj"));
    assert_eq!(p.param("WR_1"), Some("/Users/dev/.cargo/registry"));
}

#[test]
fn full_access_modes_have_no_profile() {
    for mode in [SandboxMode::DangerFullAccess, SandboxMode::ExternalSandbox] {
        let mut r = resolved(matrix()[0]);
        r.mode = mode;
        let err = profile_with(&r, &host()).expect_err("no profile");
        assert!(err.to_string().contains("without an OS sandbox"), "{err}");
    }
}

#[test]
fn hostile_path_text_stays_a_parameter() {
    let mut r = resolved(matrix()[8]);
    let evil = "/Users/dev/proj\") (allow default) (\"x\n;";
    r.writable_roots[0].path = evil.into();
    r.deny_read[0].path = "/Users/dev/#\"x".into();
    let p = profile_with(&r, &host()).expect("plan");
    assert!(!p.text.contains("(allow default)"));
    assert_eq!(p.param("WR_0"), Some(evil));
    let forms = sexp::parse(&p.text).expect("parse");
    assert!(forms.iter().all(|f| atoms(f) != ["allow", "default"]));
}

#[cfg(unix)]
#[test]
fn non_utf8_paths_are_refused_not_dropped() {
    use std::os::unix::ffi::OsStrExt;
    let mut r = resolved(matrix()[0]);
    r.deny_read[0].path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"/Users/\xff"));
    let err = profile_with(&r, &host()).expect_err("refused");
    assert!(err.to_string().contains("not valid UTF-8"), "{err}");
}

#[test]
fn explain_without_tmp_notes_it_and_still_balances() {
    let r = resolved(matrix()[8]);
    let e = seatbelt::explain_with(&r, &DarwinHost::default());
    let text = e.profile.clone().expect("profile");
    assert!(!text.contains("\"TMP\""));
    assert!(e.notes.iter().any(|n| n.contains("private temp dir")));
    let forms = sexp::parse(&text).expect("parse");
    let used = sexp::params_used(&forms);
    let supplied: BTreeSet<String> = e.params.iter().map(|x| x.name.clone()).collect();
    assert_eq!(used, supplied);
    let rendered = e.render_text();
    assert!(rendered.contains("-DWR_0=/Users/dev/proj"));
    assert!(rendered.contains("(deny default)"));
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["backend"], "seatbelt");
    assert_eq!(json["params"][0]["name"], "WR_0");
}

#[test]
fn unavailable_elsewhere_is_exit_125_with_the_reason() {
    let e = seatbelt::unavailable_on("linux");
    assert_eq!(e.exit_code(), 125);
    assert!(
        e.to_string().contains("Seatbelt exists only on macOS"),
        "{e}"
    );
    if !cfg!(target_os = "macos") {
        assert!(seatbelt::unavailable_here()
            .to_string()
            .contains(std::env::consts::OS));
    }
}

/// End to end from a real `resolve()` on a temp tree: every resolved path
/// reaches the plan as a parameter, none as text.
#[test]
fn plan_from_real_resolution() {
    let t = tempfile::tempdir().expect("tempdir");
    let home = t.path().join("home");
    let ws = t.path().join("ws");
    std::fs::create_dir_all(home.join(".ssh")).expect("mk");
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("mk");
    std::fs::write(ws.join(".env"), "K=v").expect("w");
    let facts = HostFacts {
        homes: vec![home.clone()],
        cargo_home: None,
        xdg_cache_home: None,
    };
    let pol = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &ws);
    let r = policy::resolve(&pol, &facts).expect("resolve");
    let p = profile_with(&r, &DarwinHost::default()).expect("plan");
    let values: BTreeSet<&str> = p.params.iter().map(|x| x.value.as_str()).collect();
    for e in r.writable_roots.iter().chain(&r.deny_read) {
        let s = e.path.to_str().expect("utf8");
        assert!(values.contains(s), "{s} missing from params");
        assert!(!p.text.contains(s), "{s} in text");
    }
    let ws = std::fs::canonicalize(&ws).expect("canon");
    assert!(values.contains(ws.join(".git/hooks").to_str().expect("utf8")));
    assert!(values.contains(ws.join(".env").to_str().expect("utf8")));
    assert!(values.contains(home.join(".ssh").to_str().expect("utf8")));
    let forms = sexp::parse(&p.text).expect("parse");
    let used = sexp::params_used(&forms);
    assert_eq!(used.len(), p.params.len());
    // What `sandbox explain --backend seatbelt --sandbox workspace-write`
    // prints: deny-default, paths only among the parameters.
    let e = seatbelt::explain_with(&r, &DarwinHost::default());
    let text = e.render_text();
    let profile = e.profile.expect("profile");
    assert!(profile.contains("(deny default)"));
    let ws_s = ws.to_str().expect("utf8");
    assert!(!profile.contains(ws_s));
    assert!(text.contains(&format!("-DWR_0={ws_s}")));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever bytes a path holds (quotes, parentheses, `#"`, `;`, newlines,
    /// non-ASCII), the profile stays balanced, every param is matched both
    /// ways, and the path appears only as a parameter value.
    #[test]
    fn arbitrary_paths_never_reach_the_text(
        ws in "[a-z\"()#;\n é\\\\]{1,12}",
        child in "[a-z\"()#;\n é]{1,8}",
        secret in "[a-z\"()#;\n é]{1,8}",
    ) {
        let mut r = resolved(matrix()[8]);
        let root = format!("/Users/{ws}");
        r.writable_roots[0].path = root.clone().into();
        r.protected[0].path = format!("{root}/{child}").into();
        r.deny_read[0].path = format!("/Users/dev/{secret}").into();
        let p = profile_with(&r, &host()).expect("plan");
        let forms = sexp::parse(&p.text).expect("balanced");
        let used = sexp::params_used(&forms);
        let supplied: BTreeSet<String> = p.params.iter().map(|x| x.name.clone()).collect();
        proptest::prop_assert_eq!(used, supplied);
        for param in &p.params {
            proptest::prop_assert!(!p.text.contains(&param.value), "{} leaked", param.value);
        }
        proptest::prop_assert_eq!(p.param("WR_0"), Some(root.as_str()));
    }
}
