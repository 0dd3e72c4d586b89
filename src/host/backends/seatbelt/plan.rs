//! Profile generation: fragments first, then the generated rules that
//! reference parameters, deny-read last.

use super::{
    DarwinHost, Param, SeatbeltError, SeatbeltProfile, BASE_SBPL, DEVICES_SBPL, NETWORK_SBPL,
    READ_ALL_SBPL,
};
use crate::policy::resolve::{PathEntry, PathKind};
use crate::policy::tables::{self, Anchor};
use crate::policy::{ResolvedPolicy, SandboxMode};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// macOS top-level names that are symlinks into `/private`. The kernel
/// reports the canonical form; users and configs spell the short one.
const PRIVATE_ALIASES: &[&str] = &["var", "tmp", "etc"];

#[derive(Default)]
struct Builder {
    text: String,
    params: Vec<Param>,
    notes: Vec<String>,
}

impl Builder {
    fn fragment(&mut self, name: &str, body: &str) {
        let _ = writeln!(
            self.text,
            ";;;; ---- fragment: sandbox-profiles/{name} ----"
        );
        self.text.push_str(body.trim_end());
        self.text.push_str("\n\n");
    }

    fn line(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    /// Add a parameter and return its name.
    fn param(
        &mut self,
        name: String,
        path: &Path,
        what: &'static str,
        why: &str,
    ) -> Result<String, SeatbeltError> {
        let value = path
            .to_str()
            .ok_or_else(|| SeatbeltError::NonUtf8 {
                what,
                path: path.to_path_buf(),
            })?
            .to_string();
        self.params.push(Param {
            name: name.clone(),
            value,
            why: why.to_string(),
        });
        Ok(name)
    }
}

/// `subpath` for directories and for paths that do not exist yet (so the
/// rule also covers first-time creation and anything created below them);
/// `literal` for existing files, which cannot have children.
fn filter_kind(e: &PathEntry) -> &'static str {
    match e.kind {
        PathKind::File | PathKind::Other => "literal",
        PathKind::Symlink if !e.dir_hint => "literal",
        _ => "subpath",
    }
}

/// The same path in its `/private/...` and short spellings.
pub(super) fn private_aliases(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    let mut comps = p.components();
    if comps.next() != Some(std::path::Component::RootDir) {
        return out;
    }
    let rest: PathBuf = comps.clone().collect();
    let first = comps.next().and_then(|c| c.as_os_str().to_str());
    match first {
        Some("private") => {
            let after: PathBuf = comps.collect();
            if after
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .is_some_and(|n| PRIVATE_ALIASES.contains(&n))
            {
                out.push(Path::new("/").join(after));
            }
        }
        Some(n) if PRIVATE_ALIASES.contains(&n) => out.push(Path::new("/private").join(rest)),
        _ => {}
    }
    out
}

/// A regex fragment matching `name` case-insensitively (APFS is usually
/// case-insensitive: `.GIT/HOOKS` is `.git/hooks`). `*` is one component.
fn ci_component(name: &str) -> String {
    if name == "*" {
        return "[^/]+".to_string();
    }
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphabetic() {
            let _ = write!(
                out,
                "[{}{}]",
                c.to_ascii_lowercase(),
                c.to_ascii_uppercase()
            );
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.push('\\');
            out.push(c);
        }
    }
    out
}

/// `^(/[^/]+)×depth/` + the components: anchors a table path to a root by
/// the root's depth alone, so no path text enters the profile. Combined
/// with `(subpath (param "WR_N"))` this is exactly "under root N".
fn depth_regex(depth: usize, rel: &[&str], subtree: bool) -> String {
    let mut re = String::from("^");
    for _ in 0..depth {
        re.push_str("/[^/]+");
    }
    for c in rel {
        re.push('/');
        re.push_str(&ci_component(c));
    }
    if subtree {
        re.push_str("(/.*)?$");
    } else {
        re.push('$');
    }
    re
}

fn depth_of(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count()
}

struct Root {
    path: PathBuf,
    reason: String,
}

pub(super) fn build(
    resolved: &ResolvedPolicy,
    host: &DarwinHost,
) -> Result<SeatbeltProfile, SeatbeltError> {
    if !resolved.mode.is_sandboxed() {
        return Err(SeatbeltError::NotSandboxed {
            mode: resolved.mode,
        });
    }
    let mut b = Builder::default();
    let _ = writeln!(
        b.text,
        ";;;; codewhale Seatbelt profile: mode {}, network {}. Paths are parameters.\n",
        resolved.mode,
        if resolved.network { "on" } else { "off" }
    );
    b.fragment("base.sbpl", BASE_SBPL);
    b.fragment("read-all.sbpl", READ_ALL_SBPL);
    b.fragment("devices.sbpl", DEVICES_SBPL);
    if resolved.network {
        b.fragment("network.sbpl", NETWORK_SBPL);
    } else {
        b.notes
            .push("network: none (no network rules; the default deny refuses every socket connect, bind and accept)".into());
    }

    b.line(";;;; ---- generated: writable paths ----");
    if resolved.private_tmp {
        match &host.private_tmp {
            Some(t) => {
                let n = b.param("TMP".into(), t, "private temp dir", "per-run private temp dir (TMPDIR)")?;
                b.line("; The per-run private temp dir (TMPDIR): created empty for this run.");
                let _ = writeln!(b.text, "(allow file-write* (subpath (param \"{n}\")))");
            }
            None => b.notes.push(
                "private temp dir: created per run and made writable as parameter TMP (TMPDIR); not shown when only planning".into(),
            ),
        }
    }

    let mut roots: Vec<Root> = Vec::new();
    if resolved.mode == SandboxMode::WorkspaceWrite {
        for r in &resolved.writable_roots {
            roots.push(Root {
                path: r.path.clone(),
                reason: r.reason.clone(),
            });
        }
        if let Some(c) = &host.user_cache_dir {
            if !roots.iter().any(|r| &r.path == c) {
                roots.push(Root {
                    path: c.clone(),
                    reason: "Darwin user cache dir (clang module cache, Apple tools)".into(),
                });
            }
        }
    }
    // A root that is itself write-protected (or lies inside a protected
    // path) is not writable at all: protection wins over the root.
    let (roots, shadowed): (Vec<Root>, Vec<Root>) = roots.into_iter().partition(|r| {
        !resolved
            .protected
            .iter()
            .any(|p| r.path.starts_with(&p.path))
    });
    for r in &shadowed {
        b.notes.push(format!(
            "{} ({}) is write-protected, so it is not a writable root",
            r.path.display(),
            r.reason
        ));
    }
    for (i, root) in roots.iter().enumerate() {
        write_root(&mut b, i, root, &resolved.protected)?;
    }
    if resolved.mode == SandboxMode::WorkspaceWrite && host.user_cache_dir.is_none() {
        b.notes.push(
            "Darwin user cache dir: detected on macOS only (confstr); writable there as one more WR_ parameter".into(),
        );
    }
    if roots.is_empty() {
        b.line("; No writable roots in this mode.");
    }

    b.line("");
    b.line(";;;; ---- generated: deny-read, last so it wins over every allow ----");
    let mut seen = BTreeSet::new();
    let mut rules = Vec::new();
    for e in &resolved.deny_read {
        for alias in private_aliases(&e.path) {
            if !seen.insert(alias.clone()) {
                continue;
            }
            let name = format!("DR_{}", rules.len());
            let n = b.param(name, &alias, "deny-read path", &e.reason)?;
            rules.push(format!("  ({} (param \"{n}\"))", filter_kind(e)));
        }
    }
    if rules.is_empty() {
        b.line("; No deny-read paths.");
    } else {
        b.line("; Credential stores and secret files: unreadable even though reads are open,");
        b.line("; and unwritable, so a command cannot rename a secret to a readable name.");
        b.line("(deny file-read* file-write*");
        for r in &rules {
            b.line(r);
        }
        b.line(")");
    }
    Ok(SeatbeltProfile {
        mode: resolved.mode,
        network: resolved.network,
        text: b.text,
        params: b.params,
        notes: b.notes,
    })
}

/// One writable root: allowed for `file-write*` except its protected
/// children (parameters), their ancestors as literals (so they cannot be
/// renamed away and back) and the table names case-insensitively.
fn write_root(
    b: &mut Builder,
    i: usize,
    root: &Root,
    protected: &[PathEntry],
) -> Result<(), SeatbeltError> {
    let root_name = b.param(format!("WR_{i}"), &root.path, "writable root", &root.reason)?;
    let mut excl: Vec<String> = Vec::new();
    let mut ancestors: BTreeSet<PathBuf> = BTreeSet::new();
    for (j, e) in protected
        .iter()
        .filter(|e| e.path != root.path && e.path.starts_with(&root.path))
        .enumerate()
    {
        let n = b.param(
            format!("WR_{i}_P_{j}"),
            &e.path,
            "protected path",
            &e.reason,
        )?;
        excl.push(format!(
            "    (require-not ({} (param \"{n}\")))",
            filter_kind(e)
        ));
        let mut a = e.path.parent();
        while let Some(anc) = a {
            if anc == root.path || !anc.starts_with(&root.path) {
                break;
            }
            ancestors.insert(anc.to_path_buf());
            a = anc.parent();
        }
    }
    for (k, anc) in ancestors.iter().enumerate() {
        let n = b.param(
            format!("WR_{i}_A_{k}"),
            anc,
            "protected ancestor",
            "ancestor of a protected path: renaming it away and back would bypass the rule",
        )?;
        excl.push(format!("    (require-not (literal (param \"{n}\")))"));
    }
    // Table names, case-insensitive, anchored to this root by depth.
    let depth = depth_of(&root.path);
    let mut table_ancestors: BTreeSet<Vec<&str>> = BTreeSet::new();
    for t in tables::PROTECT_WRITE
        .iter()
        .filter(|t| t.anchor == Anchor::WritableRoot)
    {
        let rel: Vec<&str> = t.path.split('/').collect();
        excl.push(format!(
            "    (require-not (regex #\"{}\"))",
            depth_regex(depth, &rel, true)
        ));
        for n in 1..rel.len() {
            table_ancestors.insert(rel[..n].to_vec());
        }
    }
    for rel in &table_ancestors {
        excl.push(format!(
            "    (require-not (regex #\"{}\"))",
            depth_regex(depth, rel, false)
        ));
    }
    let _ = writeln!(
        b.text,
        "; Writable root {i} ({}), minus its write-protected paths.",
        root.reason
    );
    b.line("(allow file-write*");
    b.line("  (require-all");
    let _ = writeln!(b.text, "    (subpath (param \"{root_name}\"))");
    for x in &excl {
        b.line(x);
    }
    b.line("  ))");
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn aliases_cover_private_spellings() {
        assert_eq!(
            private_aliases(Path::new("/var/folders/x/.env")),
            vec![
                PathBuf::from("/var/folders/x/.env"),
                PathBuf::from("/private/var/folders/x/.env")
            ]
        );
        assert_eq!(
            private_aliases(Path::new("/private/tmp/a")),
            vec![PathBuf::from("/private/tmp/a"), PathBuf::from("/tmp/a")]
        );
        assert_eq!(
            private_aliases(Path::new("/private/etc")),
            vec![PathBuf::from("/private/etc"), PathBuf::from("/etc")]
        );
        assert_eq!(
            private_aliases(Path::new("/Users/dev/.ssh")),
            vec![PathBuf::from("/Users/dev/.ssh")]
        );
        assert_eq!(
            private_aliases(Path::new("/private/other")),
            vec![PathBuf::from("/private/other")]
        );
        assert_eq!(
            private_aliases(Path::new("/variable")),
            vec![PathBuf::from("/variable")]
        );
    }

    #[test]
    fn depth_regex_is_anchored_and_case_insensitive() {
        let re = depth_regex(3, &[".git", "hooks"], true);
        assert_eq!(
            re,
            "^/[^/]+/[^/]+/[^/]+/\\.[gG][iI][tT]/[hH][oO][oO][kK][sS](/.*)?$"
        );
        let r = regex::Regex::new(&re).unwrap();
        assert!(r.is_match("/Users/dev/proj/.git/hooks"));
        assert!(r.is_match("/Users/dev/proj/.GIT/Hooks/pre-commit"));
        assert!(!r.is_match("/Users/dev/proj/sub/.git/hooks"));
        assert!(!r.is_match("/Users/dev/.git/hooks"));
        assert!(!r.is_match("/Users/dev/proj/.git/hooksx"));
        let star = depth_regex(1, &[".git", "modules", "*", "config"], false);
        let r = regex::Regex::new(&star).unwrap();
        assert!(r.is_match("/ws/.git/modules/sub/CONFIG"));
        assert!(!r.is_match("/ws/.git/modules/sub/config/x"));
        assert!(!r.is_match("/ws/.git/modules/a/b/config"));
    }

    #[test]
    fn ci_component_escapes_specials() {
        assert_eq!(
            ci_component(".mcp.json"),
            "\\.[mM][cC][pP]\\.[jJ][sS][oO][nN]"
        );
        assert_eq!(ci_component("a_b-1"), "[aA]_[bB]-1");
    }
}
