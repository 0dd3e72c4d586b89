//! The safety floor (gate 6) and the catastrophic-command table the
//! built-in rules layer (gate 5) hard-denies.
//!
//! All checks look at *every piece* the shell would run (see [`super::shell`]),
//! so chains, substitutions, wrappers and `sh -c` cannot hide them:
//! - credential upload: a network tool whose data source is a deny-read path
//!   or a key-looking file, or any command that both touches such a file and
//!   runs a network tool (variables, temp files and pipes can join them);
//! - publishing: `git push`, `npm/cargo publish`, `gh release`, image pushes,
//!   package uploads;
//! - destructive actions (for background/headless runs);
//! - catastrophic actions (`rm -rf /`, `mkfs`, `dd` onto a disk): hard denies.

use super::readonly::git_subcommand;
use super::shell::{Analysis, Piece};
use crate::policy::tables::{self, Anchor};

/// Facts the floor needs about the host (injected; tests use fixed values).
#[derive(Clone, Debug, Default)]
pub struct FloorContext {
    /// Home directory candidates as absolute paths.
    pub homes: Vec<String>,
    /// `[sandbox] deny_read` entries from the user config (`~/`-relative or absolute).
    pub extra_deny_read: Vec<String>,
}

/// Network tools that can send data.
const NETWORK_TOOLS: &[&str] = &[
    "curl", "wget", "http", "https", "xh", "xhs", "httpie", "nc", "ncat", "netcat", "socat", "scp",
    "sftp", "rsync", "ftp", "tftp", "telnet", "aria2c", "lftp", "ssh", "openssl",
];

/// File names that look like keys or credential stores wherever they live.
const KEY_LIKE_NAMES: &[&str] = &[
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    "credentials",
    "credentials.json",
    "credentials.toml",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    "hosts.yml",
    "known_hosts",
    "authorized_keys",
];
const KEY_LIKE_SUFFIXES: &[&str] = &[
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".kdbx",
    ".ppk",
    ".asc",
    ".gpg",
];

/// Reduce a path as written to a home-relative form (`.ssh/id_rsa`) when it
/// points into a home directory.
fn home_relative(path: &str, ctx: &FloorContext) -> Option<String> {
    let p = path.trim_matches(|c| c == '"' || c == '\'');
    for pre in ["~/", "$HOME/", "${HOME}/"] {
        if let Some(rest) = p.strip_prefix(pre) {
            return Some(rest.to_string());
        }
    }
    if p == "~" || p == "$HOME" || p == "${HOME}" {
        return Some(String::new());
    }
    if let Some(rest) = p.strip_prefix('~') {
        // ~user/...
        return rest.split_once('/').map(|(_, r)| r.to_string());
    }
    for home in &ctx.homes {
        let h = home.trim_end_matches('/');
        if let Some(rest) = p.strip_prefix(h).and_then(|r| r.strip_prefix('/')) {
            return Some(rest.to_string());
        }
    }
    for base in ["/root/", "/home/", "/Users/"] {
        if let Some(rest) = p.strip_prefix(base) {
            return Some(if base == "/root/" {
                rest.to_string()
            } else {
                rest.split_once('/')
                    .map(|(_, r)| r.to_string())
                    .unwrap_or_default()
            });
        }
    }
    None
}

fn lexical_clean(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Why `path` is a credential source, if it is: a deny-read table entry, a
/// workspace `.env` file, a configured `deny_read` entry, or a key-looking name.
pub fn credential_reason(path: &str, ctx: &FloorContext) -> Option<String> {
    let path = path.strip_prefix('@').unwrap_or(path);
    if path.is_empty() {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some(rel) = home_relative(path, ctx) {
        let rel = lexical_clean(&rel);
        for e in tables::DENY_READ
            .iter()
            .filter(|e| e.anchor == Anchor::Home)
        {
            if rel == e.path || rel.starts_with(&format!("{}/", e.path)) {
                return Some(format!("`{path}` is a deny-read path ({})", e.reason));
            }
        }
        for extra in &ctx.extra_deny_read {
            if let Some(x) = extra.strip_prefix("~/") {
                let x = x.trim_end_matches('/');
                if rel == x || rel.starts_with(&format!("{x}/")) {
                    return Some(format!("`{path}` is a configured deny-read path"));
                }
            }
        }
    }
    let abs = format!("/{}", lexical_clean(path));
    for e in tables::DENY_READ
        .iter()
        .filter(|e| e.anchor == Anchor::Absolute)
    {
        if path.starts_with('/') && abs == e.path {
            return Some(format!("`{path}` is a deny-read path ({})", e.reason));
        }
    }
    for extra in &ctx.extra_deny_read {
        if extra.starts_with('/') && path.starts_with('/') {
            let x = extra.trim_end_matches('/');
            if abs == x || abs.starts_with(&format!("{x}/")) {
                return Some(format!("`{path}` is a configured deny-read path"));
            }
        }
    }
    if tables::is_env_file_name(name) {
        return Some(format!(
            "`{path}` is a .env file ({})",
            tables::ENV_FILE_REASON
        ));
    }
    let lower = name.to_ascii_lowercase();
    if KEY_LIKE_NAMES.contains(&lower.as_str())
        || KEY_LIKE_SUFFIXES.iter().any(|s| lower.ends_with(s))
        || (lower.starts_with("id_") && (lower.contains("rsa") || lower.contains("ed25519")))
        || lower.starts_with("service-account")
    {
        return Some(format!("`{path}` looks like a key or credential file"));
    }
    None
}

/// Candidate file operands of a piece: plain args, `@file`, `name=@file`,
/// `name@file`, `name=<file`, `--opt=file`, and input redirections.
fn file_operands(p: &Piece) -> Vec<String> {
    let mut v = Vec::new();
    for a in p.args() {
        v.push(a.clone());
        if let Some((_, val)) = a.split_once('=') {
            v.push(val.trim_start_matches(['@', '<']).to_string());
        }
        if let Some(idx) = a.find('@') {
            v.push(a[idx + 1..].to_string());
        }
        if let Some(rest) = a.strip_prefix("-d").or_else(|| a.strip_prefix("-T")) {
            v.push(rest.trim_start_matches('@').to_string());
        }
    }
    for r in &p.redirects {
        if r.reads_file() || r.op == "<<<" {
            v.push(r.target.text.clone());
        }
    }
    v
}

/// The first credential a piece references, if any.
fn piece_credential(p: &Piece, ctx: &FloorContext) -> Option<String> {
    file_operands(p)
        .iter()
        .find_map(|f| credential_reason(f, ctx))
}

fn is_network(p: &Piece) -> bool {
    NETWORK_TOOLS.contains(&p.program())
        || p.redirects.iter().any(|r| {
            // bash's /dev/tcp and /dev/udp redirections open sockets.
            r.target.text.starts_with("/dev/tcp/") || r.target.text.starts_with("/dev/udp/")
        })
}

/// Credential upload: a hold reason, if the command could send a credential
/// over the network.
pub fn credential_upload(a: &Analysis, ctx: &FloorContext) -> Option<String> {
    let net: Vec<&Piece> = a.pieces.iter().filter(|p| is_network(p)).collect();
    if net.is_empty() {
        return None;
    }
    for p in &net {
        if let Some(why) = piece_credential(p, ctx) {
            return Some(format!(
                "credential upload: `{}` sends a file out, and {why}",
                p.display()
            ));
        }
    }
    for p in &a.pieces {
        if let Some(why) = piece_credential(p, ctx) {
            return Some(format!(
                "credential upload: the command runs `{}` and `{}` reads {why}",
                net[0].program(),
                p.display()
            ));
        }
    }
    None
}

/// Publishing: a hold reason, if any piece publishes or pushes.
pub fn publishing(a: &Analysis) -> Option<String> {
    a.pieces.iter().find_map(|p| {
        publishes(p).map(|what| format!("publishing action ({what}): `{}`", p.display()))
    })
}

fn first_positional(args: &[String]) -> Option<&str> {
    args.iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
}

fn publishes(p: &Piece) -> Option<&'static str> {
    let args = p.args();
    let sub = first_positional(args);
    match p.program() {
        "git" => match git_subcommand(args).0 {
            Some((_, "push")) => Some("git push"),
            Some((_, "send-email")) => Some("git send-email"),
            _ => None,
        },
        "npm" | "pnpm" | "yarn" | "bun" => match sub {
            Some("publish") => Some("package publish"),
            Some("npm") if args.iter().any(|a| a == "publish") => Some("package publish"),
            _ => None,
        },
        "cargo" => (sub == Some("publish")).then_some("crate publish"),
        "gh" => match sub {
            Some("release") => Some("GitHub release"),
            Some("repo") if args.iter().any(|a| a == "create" || a == "edit") => {
                Some("GitHub repository change")
            }
            Some("pr") if args.iter().any(|a| a == "merge") => Some("pull request merge"),
            _ => None,
        },
        "docker" | "podman" | "buildah" | "nerdctl" => {
            let pushy = sub == Some("push")
                || (sub == Some("image") && args.iter().any(|a| a == "push"))
                || (sub == Some("buildx") && args.iter().any(|a| a == "--push"));
            pushy.then_some("image push")
        }
        "skopeo" => matches!(sub, Some("copy" | "sync")).then_some("image push"),
        "twine" => (sub == Some("upload")).then_some("package upload"),
        "poetry" | "flit" | "hatch" | "uv" | "pdm" => {
            (sub == Some("publish")).then_some("package upload")
        }
        "gem" => (sub == Some("push")).then_some("gem push"),
        "dotnet" | "nuget" => args.iter().any(|a| a == "push").then_some("package push"),
        "mvn" | "gradle" | "./gradlew" | "gradlew" => args
            .iter()
            .any(|a| a == "deploy" || a == "publish")
            .then_some("artifact deploy"),
        "helm" => (sub == Some("push")).then_some("chart push"),
        "vsce" | "ovsx" => (sub == Some("publish")).then_some("extension publish"),
        _ => None,
    }
}

fn rm_flags(args: &[String]) -> (bool, bool, Vec<&str>) {
    let mut recursive = false;
    let mut force = false;
    let mut targets = Vec::new();
    let mut opts_done = false;
    for a in args {
        if !opts_done && a == "--" {
            opts_done = true;
        } else if !opts_done && a.starts_with("--") {
            recursive |= a == "--recursive";
            force |= a == "--force";
        } else if !opts_done && a.starts_with('-') && a.len() > 1 {
            recursive |= a.contains(['r', 'R']);
            force |= a.contains('f');
        } else {
            targets.push(a.as_str());
        }
    }
    (recursive, force, targets)
}

/// Targets whose recursive removal destroys the system or a home.
fn catastrophic_target(t: &str) -> bool {
    let t = t.trim_end_matches('/');
    let t = t.strip_suffix("/*").unwrap_or(t);
    const SYSTEM: &[&str] = &[
        "", "/", "/*", "~", "$HOME", "${HOME}", "/home", "/root", "/usr", "/etc", "/var", "/bin",
        "/sbin", "/lib", "/lib64", "/boot", "/opt", "/Users", "/System", "/Library", "/dev",
        "/proc", "/sys", "*", "..", "~/*",
    ];
    SYSTEM.contains(&t)
}

/// Disks, partitions and raw memory: writing them destroys the system.
fn is_disk_device(path: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/dev/sd",
        "/dev/hd",
        "/dev/vd",
        "/dev/xvd",
        "/dev/nvme",
        "/dev/mmcblk",
        "/dev/disk",
        "/dev/rdisk",
        "/dev/mapper/",
        "/dev/dm-",
        "/dev/md",
        "/dev/loop",
        "/dev/nbd",
    ];
    PREFIXES.iter().any(|p| path.starts_with(p))
        || matches!(path, "/dev/mem" | "/dev/kmem" | "/dev/port")
}

/// A hard-deny reason, if a piece is catastrophic (checked in every posture).
pub fn catastrophic(p: &Piece) -> Option<String> {
    let args = p.args();
    let prog = p.program();
    let reason = match prog {
        "rm" => {
            let (recursive, _force, targets) = rm_flags(args);
            let hit = targets.iter().find(|t| catastrophic_target(t));
            match hit {
                Some(t) if recursive => Some(format!("recursive removal of `{t}`")),
                _ if args.iter().any(|a| a == "--no-preserve-root") => {
                    Some("rm --no-preserve-root".to_string())
                }
                _ => None,
            }
        }
        "chmod" | "chown" | "chgrp" => {
            let (recursive, _, targets) = rm_flags(args);
            (recursive && targets.iter().skip(1).any(|t| catastrophic_target(t)))
                .then(|| format!("recursive {prog} of a system root"))
        }
        _ if prog.starts_with("mkfs")
            || prog == "wipefs"
            || prog == "fdisk"
            || prog == "sfdisk" =>
        {
            Some(format!("`{prog}` rewrites a filesystem or partition table"))
        }
        "find" if args.iter().any(|a| a == "-delete") => args
            .iter()
            .take_while(|a| !a.starts_with('-'))
            .find(|t| catastrophic_target(t))
            .map(|t| format!("find -delete over `{t}`")),
        "dd" => args
            .iter()
            .find(|a| a.strip_prefix("of=").is_some_and(is_disk_device))
            .map(|a| format!("dd writes a device ({a})")),
        "shred" => args
            .iter()
            .find(|a| is_disk_device(a))
            .map(|a| format!("shred of a device ({a})")),
        _ => None,
    };
    if reason.is_some() {
        return reason;
    }
    p.redirects
        .iter()
        .find(|r| r.writes_file() && is_disk_device(&r.target.text))
        .map(|r| format!("redirection onto a device ({})", r.target.text))
}

/// A reason if a piece destroys data (held in background/headless runs).
pub fn destructive(p: &Piece) -> Option<String> {
    let args = p.args();
    let d = match p.program() {
        "rm" | "rmdir" | "shred" | "truncate" | "unlink" | "dd" | "srm" => true,
        "find" => args.iter().any(|a| a == "-delete"),
        "git" => match git_subcommand(args).0 {
            Some((i, sub)) => {
                let rest = &args[i + 1..];
                match sub {
                    "reset" => rest.iter().any(|a| a == "--hard"),
                    "clean" => rest.iter().any(|a| a.starts_with('-') && a.contains('f')),
                    "checkout" | "restore" => {
                        rest.iter().any(|a| a == "--" || a == "." || a == "-f")
                    }
                    "push" => rest.iter().any(|a| {
                        a.starts_with("--force")
                            || a == "-f"
                            || a.starts_with("--delete")
                            || a.starts_with(':')
                    }),
                    "branch" => rest.iter().any(|a| a == "-D" || a == "--delete"),
                    _ => false,
                }
            }
            None => false,
        },
        "mv" => args.iter().any(|a| a == "-f"),
        _ => false,
    };
    d.then(|| format!("destructive action `{}`", p.display()))
        .or_else(|| catastrophic(p))
}

/// A hold reason if a destructive piece's targets are only known at run
/// time (`xargs rm -rf`, `rm -rf "$DIR"/`: an empty variable means `/`).
pub fn destructive_unknown_target(p: &Piece) -> Option<String> {
    destructive(p)?;
    if p.args_from_stdin {
        return Some(format!("`{}` takes its targets from stdin", p.display()));
    }
    let dynamic = p.dynamic.iter().skip(1).any(|d| *d);
    dynamic.then(|| format!("`{}` has targets only known at run time", p.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "floor_tests.rs"]
mod tests;
