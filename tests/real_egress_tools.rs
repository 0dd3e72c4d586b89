#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! Real package tools under `network = "allowlist"`, in every Linux tier
//! (bwrap: empty netns + bridge; landlock: only the proxy's port is
//! connectable), root and unprivileged: `git clone` over HTTP (dumb and
//! smart), `pip download`, `npm view`, `cargo fetch` from a sparse
//! registry, each against a loopback origin (Python's
//! `http.server`, see tests/common/tool_origin.py) whose test names
//! resolve only through the proxy's test resolver
//! (`CODEWHALE_TEST_RESOLVE`, never `/etc/hosts`: inside the sandbox the
//! names resolve nowhere).
//!
//! Each test is a positive control and its denial in one sandboxed run:
//! the allowed name works (host state checked afterwards), the same tool
//! with a name off the list fails; on the server's side every request that
//! arrived came from a socket the proxy itself dialled (its peer address is
//! the `local` end of one of the proxy's allowed events, under the allowed
//! name), and nothing at all arrived for the denied name.

mod common;

use std::collections::BTreeSet;

use common::egress::EgressWorld;
use common::sandbox::{tiers, Case, Mode, Run};
use common::tool_origin::{self, ToolOrigin};

struct World {
    base: EgressWorld,
    /// `ws/out`, made before the run: where the tools write. (The
    /// landlock tier keeps files created directly in a workspace holding a
    /// deny-read file such as `.env` unreadable, reported over-restricted;
    /// git opens its lock files read-write.)
    out: std::path::PathBuf,
    origin: ToolOrigin,
}

impl World {
    fn new() -> World {
        let base = EgressWorld::new();
        let origin = ToolOrigin::start(&base.fx.root, &base.fx.home);
        let out = base.fx.ws.join("out");
        std::fs::create_dir(&out).unwrap();
        World { base, out, origin }
    }

    /// `sandbox run --network=allowlist --allow-domain ALLOW -- sh -c
    /// SCRIPT`, with `NAME.test` and `evil.test` both resolving to the
    /// origin (so only the allow list tells them apart).
    fn run(&self, case: &Case, allow: &str, script: &str) -> Run {
        let resolve = format!("{allow}=127.0.0.1!loopback;evil.test=127.0.0.1!loopback");
        self.base
            .run_with(case, &resolve, &["--allow-domain", allow], script, |c| {
                // The tools' own settings of this machine stay out
                // (find-links, mirrors, proxies of the CI host): only what
                // codewhale sets counts.
                for (k, _) in std::env::vars_os() {
                    let k = k.to_string_lossy().to_string();
                    if k.starts_with("PIP_") || k.to_ascii_lowercase().starts_with("npm_config_") {
                        c.env_remove(k);
                    }
                }
                c.env("PIP_CONFIG_FILE", "/dev/null");
            })
    }

    /// The server-side checks every tool test makes: at least `min`
    /// requests arrived, all under `allowed:PORT`, each from a socket the
    /// proxy dialled for that name (and every such socket carried one);
    /// none for `evil.test`, which the proxy refused.
    fn assert_only_via_proxy(&self, case: &Case, r: &Run, allowed: &str, min: usize) {
        let reqs = self.origin.requests();
        let events = r.enforcement()["egress"]["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ctx = format!(
            "[{case}] requests: {reqs:#?}\nevents: {events:#?}\nstdout: {}\nstderr: {}",
            r.stdout, r.stderr
        );
        assert!(reqs.len() >= min, "{ctx}");
        let want_host = format!("{allowed}:{}", self.origin.port);
        assert!(reqs.iter().all(|q| q.host == want_host), "{ctx}");
        let peers: BTreeSet<String> = reqs.iter().map(|q| q.peer.clone()).collect();
        let proxied = tool_origin::proxy_sockets(&events, allowed);
        assert_eq!(
            peers, proxied,
            "every request came over a proxy socket\n{ctx}"
        );
        assert!(
            events.iter().any(|e| e["host"] == "evil.test"
                && e["decision"] == "refused"
                && e["rule"] == "not in the allow list"),
            "the denied name was refused by the proxy\n{ctx}"
        );
        assert!(
            events
                .iter()
                .filter(|e| e["decision"] == "allowed")
                .all(|e| e["host"] == allowed),
            "{ctx}"
        );
    }
}

/// The exit code the script printed last (`rc=N`, the denied command's).
fn denied_rc(r: &Run) -> i32 {
    r.stdout
        .rsplit_once("rc=")
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or(-1)
}

fn cases() -> Vec<Case> {
    tiers()
        .iter()
        .map(|t| Case {
            tier: t,
            mode: Mode::Ww,
        })
        .collect()
}

/// `git clone` over HTTP (the dumb protocol: info/refs, HEAD, objects)
/// through `http_proxy`; a clone from a name off the list fails with the
/// proxy's 403 and leaves no clone.
#[test]
fn git_clone_over_http_through_the_proxy_and_refused_for_a_denied_name() {
    for case in cases() {
        let w = World::new();
        let p = w.origin.port;
        let script = format!(
            "export GIT_TERMINAL_PROMPT=0; \
             git clone -q http://git.test:{p}/repo.git out/cloned; echo ok-rc=$?; \
             echo \"denied:$(git clone -q http://evil.test:{p}/repo.git out/denied 2>&1; echo rc=$?)\""
        );
        let r = w.run(&case, "git.test", &script);
        assert!(
            r.stdout.contains("ok-rc=0"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(
            std::fs::read_to_string(w.out.join("cloned").join(tool_origin::GIT_FILE)).ok(),
            Some(tool_origin::GIT_TEXT.to_string()),
            "[{case}] the clone is on the host"
        );
        assert!(
            r.stdout.contains("The requested URL returned error: 403") && denied_rc(&r) == 128,
            "[{case}] {}",
            r.stdout
        );
        assert!(!w.out.join("denied").exists(), "[{case}] no denied clone");
        // info/refs, HEAD and the three loose objects of one commit.
        w.assert_only_via_proxy(&case, &r, "git.test", 5);
        let paths: Vec<String> = w.origin.requests().into_iter().map(|q| q.path).collect();
        assert!(
            paths[0].starts_with("/repo.git/info/refs"),
            "[{case}] {paths:?}"
        );
    }
}

/// `pip download --no-deps` from a PEP 503 index through `PIP_PROXY`;
/// the same from an index under a name off the list fails and downloads
/// nothing (pip logs the proxy's 403 for an index page only at debug
/// level; what it says is that no version was found).
#[test]
fn pip_download_from_a_simple_index_through_the_proxy_and_refused_for_a_denied_name() {
    for case in cases() {
        let w = World::new();
        let p = w.origin.port;
        let pip = "python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check \
                   --retries 0 --timeout 10";
        let script = format!(
            "{pip} -q --index-url http://pypi.test:{p}/simple/ --trusted-host pypi.test -d out/dl demo-pkg; \
             echo ok-rc=$?; \
             echo \"denied:$({pip} --index-url http://evil.test:{p}/simple/ --trusted-host evil.test -d out/denied demo-pkg 2>&1; echo rc=$?)\""
        );
        let r = w.run(&case, "pypi.test", &script);
        assert!(
            r.stdout.contains("ok-rc=0"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        let got = std::fs::read(w.out.join("dl").join(tool_origin::WHEEL)).unwrap();
        let served = std::fs::read(w.origin.root.join("files").join(tool_origin::WHEEL)).unwrap();
        assert_eq!(
            got, served,
            "[{case}] the wheel on the host is the served one"
        );
        assert!(
            r.stdout
                .contains("No matching distribution found for demo-pkg")
                && denied_rc(&r) == 1,
            "[{case}] {}",
            r.stdout
        );
        assert!(
            !w.out.join("denied").join(tool_origin::WHEEL).exists(),
            "[{case}] nothing downloaded for the denied index"
        );
        // The project page and the wheel.
        w.assert_only_via_proxy(&case, &r, "pypi.test", 2);
    }
}

/// `npm view` against a registry answering a packument, through
/// `npm_config_proxy`; the same against a registry under a name off the
/// list fails with npm's E403.
#[test]
fn npm_view_from_a_registry_through_the_proxy_and_refused_for_a_denied_name() {
    for case in cases() {
        let w = World::new();
        let p = w.origin.port;
        let npm = "npm view demo-pkg description --cache \"$PWD/out/npm-cache\" \
                   --no-update-notifier --fetch-retries=0";
        let script = format!(
            "{npm} --registry http://npm.test:{p}/npm/; echo ok-rc=$?; \
             echo \"denied:$({npm} --registry http://evil.test:{p}/npm/ 2>&1; echo rc=$?)\""
        );
        let r = w.run(&case, "npm.test", &script);
        assert!(
            r.stdout
                .starts_with(&format!("{}\nok-rc=0", tool_origin::NPM_DESCRIPTION)),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stdout.contains("E403") && denied_rc(&r) != 0,
            "[{case}] {}",
            r.stdout
        );
        w.assert_only_via_proxy(&case, &r, "npm.test", 1);
        let paths: Vec<String> = w.origin.requests().into_iter().map(|q| q.path).collect();
        assert_eq!(paths, ["/npm/demo-pkg"], "[{case}]");
    }
}

/// `git clone` over git's smart HTTP protocol (`git http-backend` as a CGI
/// program behind the origin: the ref advertisement, then `POST
/// git-upload-pack`) through `http_proxy`; a name off the list fails with
/// the proxy's 403 and leaves no clone.
#[test]
fn git_clone_over_smart_http_through_the_proxy_and_refused_for_a_denied_name() {
    for case in cases() {
        let w = World::new();
        let p = w.origin.port;
        let script = format!(
            "export GIT_TERMINAL_PROMPT=0; \
             git clone -q http://git.test:{p}/smart/repo.git out/cloned; echo ok-rc=$?; \
             echo \"denied:$(git clone -q http://evil.test:{p}/smart/repo.git out/denied 2>&1; echo rc=$?)\""
        );
        let r = w.run(&case, "git.test", &script);
        assert!(
            r.stdout.contains("ok-rc=0"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(
            std::fs::read_to_string(w.out.join("cloned").join(tool_origin::GIT_FILE)).ok(),
            Some(tool_origin::GIT_TEXT.to_string()),
            "[{case}] the clone is on the host"
        );
        assert!(
            r.stdout.contains("The requested URL returned error: 403") && denied_rc(&r) == 128,
            "[{case}] {}",
            r.stdout
        );
        assert!(!w.out.join("denied").exists(), "[{case}] no denied clone");
        w.assert_only_via_proxy(&case, &r, "git.test", 2);
        // The smart protocol, not the dumb one: the service advertisement
        // and at least one upload-pack POST answered by git http-backend.
        let reqs = w.origin.requests();
        assert!(
            reqs[0].method == "GET"
                && reqs[0].path == "/smart/repo.git/info/refs?service=git-upload-pack",
            "[{case}] {reqs:?}"
        );
        assert!(
            reqs.iter()
                .any(|q| q.method == "POST" && q.path == "/smart/repo.git/git-upload-pack"),
            "[{case}] {reqs:?}"
        );
    }
}

/// What `cargo` needs for a sparse registry: nothing from 1.68 on, where
/// the protocol is stable; before it (Debian's cargo 1.65 of the
/// unprivileged run, see `cargo_bin_dir`) the same protocol behind
/// `-Z sparse-registry`, which `RUSTC_BOOTSTRAP=1` lets a stable cargo take.
fn sparse_flag(bin: &std::path::Path) -> &'static str {
    let out = std::process::Command::new(bin.join("cargo"))
        .arg("--version")
        .output()
        .expect("cargo --version");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let minor: u32 = text
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("cargo --version: {text:?}"));
    if minor >= 68 {
        ""
    } else {
        // Stable cargo takes `-Z` flags only with this set.
        "-Z sparse-registry"
    }
}

/// `cargo fetch` of a crate from a sparse registry (`sparse+http://`)
/// through `CARGO_HTTP_PROXY`: config.json, the index file, the `.crate`;
/// a registry under a name off the list fails (the proxy's 403 on
/// config.json) and downloads nothing.
#[test]
fn cargo_fetch_from_a_sparse_index_through_the_proxy_and_refused_for_a_denied_name() {
    for case in cases() {
        let w = World::new();
        let p = w.origin.port;
        for (dir, host) in [("app", "cargo.test"), ("denied", "evil.test")] {
            let proj = w.out.join(dir);
            std::fs::create_dir_all(proj.join("src")).unwrap();
            std::fs::create_dir_all(proj.join(".cargo")).unwrap();
            std::fs::write(
                proj.join("Cargo.toml"),
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\ndemo-crate = { version = \"1\", registry = \"local\" }\n",
            )
            .unwrap();
            std::fs::write(proj.join("src/lib.rs"), "").unwrap();
            std::fs::write(
                proj.join(".cargo/config.toml"),
                format!("[registries.local]\nindex = \"sparse+http://{host}:{p}/cargo/index/\"\n"),
            )
            .unwrap();
        }
        let bin = common::sandbox::cargo_bin_dir();
        let script = format!(
            "export PATH='{}':\"$PATH\" CARGO_NET_RETRY=0{boot}; \
             (cd out/app && CARGO_HOME=$PWD/../cargo-home cargo {z} fetch -q); echo ok-rc=$?; \
             echo \"denied:$(cd out/denied && CARGO_HOME=$PWD/../cargo-home-denied cargo {z} fetch 2>&1; echo rc=$?)\"",
            bin.display(),
            z = sparse_flag(&bin),
            boot = if sparse_flag(&bin).is_empty() { "" } else { " RUSTC_BOOTSTRAP=1" }
        );
        let r = w.run(&case, "cargo.test", &script);
        assert!(
            r.stdout.contains("ok-rc=0"),
            "[{case}] {}\n{}",
            r.stdout,
            r.stderr
        );
        let served = std::fs::read(w.origin.root.join(tool_origin::CRATE_SERVED)).unwrap();
        let cached: Vec<std::path::PathBuf> =
            std::fs::read_dir(w.out.join("cargo-home/registry/cache"))
                .unwrap()
                .flatten()
                .map(|d| d.path().join(tool_origin::CRATE))
                .filter(|p| p.exists())
                .collect();
        assert_eq!(cached.len(), 1, "[{case}] one cached .crate: {cached:?}");
        assert_eq!(
            std::fs::read(&cached[0]).unwrap(),
            served,
            "[{case}] the .crate on the host is the served one"
        );
        assert!(
            r.stdout.contains("403") && denied_rc(&r) == 101,
            "[{case}] {}",
            r.stdout
        );
        assert!(
            !w.out.join("cargo-home-denied/registry/cache").exists()
                || std::fs::read_dir(w.out.join("cargo-home-denied/registry/cache"))
                    .unwrap()
                    .flatten()
                    .all(|d| !d.path().join(tool_origin::CRATE).exists()),
            "[{case}] nothing downloaded for the denied registry"
        );
        w.assert_only_via_proxy(&case, &r, "cargo.test", 3);
        let paths: Vec<String> = w.origin.requests().into_iter().map(|q| q.path).collect();
        assert_eq!(
            paths,
            [
                "/cargo/index/config.json",
                "/cargo/index/de/mo/demo-crate",
                "/cargo/dl/demo-crate/1.0.0/download"
            ],
            "[{case}]"
        );
    }
}
