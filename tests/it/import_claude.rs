#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale import claude` (docs/IMPORT.md) on Claude Code files written
//! per Claude Code's documentation (tests/fixtures/claude/README.md): a
//! proposal that changes nothing, `--output`, then `--apply`; secrets in
//! MCP env blocks are never printed or written (carried as `${VAR}`); a
//! repository's server is proposed disabled; the imported rules are in
//! force (`permissions check`); and `${VAR}` expansion at a server's start
//! names an unset variable (`mcp list`).

use crate::common;

use common::cli::*;
use serde_json::Value;
use std::path::Path;

const SECRETS: &[&str] = &["ghp_FIXTURESECRET0123456789", "repo-literal-secret-777"];

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

fn setup() -> Fixture {
    let f = Fixture::with_config(
        "# my config\nsandbox_mode = \"workspace-write\"\n\n[tui]\ntheme = \"dark\"\n",
    );
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude");
    copy_tree(&fx.join("home"), &f.home);
    copy_tree(&fx.join("ws"), &f.ws);
    let cj = f.home.join(".claude.json");
    let text = std::fs::read_to_string(&cj)
        .unwrap()
        .replace("__WORKSPACE__", f.ws.to_str().unwrap());
    std::fs::write(&cj, text).unwrap();
    f
}

fn no_secret(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} holds a secret value:\n{text}");
    }
}

#[test]
fn a_proposal_then_apply_without_copying_a_secret() {
    let f = setup();
    let ws = f.ws.to_str().unwrap().to_string();
    let config_before = std::fs::read_to_string(f.cw_home.join("config.toml")).unwrap();

    let o = f.cmd(&["import", "claude", "-C", &ws]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    no_secret("stdout", &out);
    no_secret("stderr", &stderr(&o));
    for want in [
        "PROPOSAL",
        "+model = \"claude-sonnet-4-5-20250929\"",
        "+project_instruction_imports = [\"CLAUDE.md\"]",
        "command = \"npm run test\"",
        "command = \"git diff\"",
        "command = \"curl\"",
        "action = \"deny\"",
        "path = \".env\"",
        "tool = \"mcp__github__*\"",
        "\"github\":",
        "${GITHUB_PERSONAL_ACCESS_TOKEN}",
        "set GITHUB_PERSONAL_ACCESS_TOKEN in codewhale's environment",
        "FROM THE REPOSITORY",
        "+      \"enabled\": false",
        "${DATABASE_URL:-postgres://localhost/dev}",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    for not in [
        "WebFetch",
        "defaultMode",
        "`env`",
        "`hooks`",
        "remote-docs",
        "git * --force",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with("- ") && l.contains(not)),
            "{not} not listed as not imported:\n{out}"
        );
    }
    // A real unified diff per file: the config.toml part applies to the
    // file as it is and gives what `--apply` writes (checked below).
    let cfg_name = f.cw_home.join("config.toml").display().to_string();
    let cfg_start = out
        .find(&format!("--- {cfg_name}\n+++ {cfg_name}\n@@ "))
        .unwrap_or_else(|| panic!("no unified diff of config.toml in:\n{out}"));
    let cfg_patch: String = out[cfg_start..]
        .lines()
        // The notes (`# …` at column 0) follow the diff.
        .take_while(|l| !l.starts_with("# "))
        .map(|l| format!("{l}\n"))
        .collect();
    let expected_config = diffy::apply(
        &config_before,
        &diffy::Patch::from_str(&cfg_patch).unwrap_or_else(|e| panic!("{e}: {cfg_patch:?}\n{out}")),
    )
    .unwrap();
    assert!(
        out.contains(&format!(
            "--- /dev/null\n+++ {}\n@@ -0,0 +1,",
            f.cw_home.join("mcp.json").display()
        )),
        "{out}"
    );
    // Nothing written.
    assert_eq!(
        std::fs::read_to_string(f.cw_home.join("config.toml")).unwrap(),
        config_before
    );
    assert!(!f.cw_home.join("permissions.toml").exists());
    assert!(!f.cw_home.join("mcp.json").exists());

    // --output: the same proposal into a file.
    let out_file = f.root.join("proposal.txt");
    let o = f
        .cmd(&[
            "import",
            "claude",
            "-C",
            &ws,
            "--output",
            out_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), out);

    // --apply.
    let o = f
        .cmd(&["import", "claude", "-C", &ws, "--apply"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let config = std::fs::read_to_string(f.cw_home.join("config.toml")).unwrap();
    assert_eq!(
        config, expected_config,
        "--apply wrote what the diff showed"
    );
    assert!(config.starts_with("# my config\n"), "kept: {config}");
    assert!(config.contains("[tui]\ntheme = \"dark\""), "{config}");
    let parsed: toml::Table = config.parse().unwrap();
    assert_eq!(parsed["model"].as_str(), Some("claude-sonnet-4-5-20250929"));
    assert!(parsed["project_instruction_imports"].is_array());
    let perms = std::fs::read_to_string(f.cw_home.join("permissions.toml")).unwrap();
    let mcp = std::fs::read_to_string(f.cw_home.join("mcp.json")).unwrap();
    for (what, text) in [
        ("config.toml", &config),
        ("permissions.toml", &perms),
        ("mcp.json", &mcp),
    ] {
        no_secret(what, text);
    }
    let m: Value = serde_json::from_str(&mcp).unwrap();
    let servers = &m["mcpServers"];
    assert_eq!(
        servers["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_PERSONAL_ACCESS_TOKEN}"
    );
    assert_eq!(servers["github"].get("enabled"), None, "enabled by default");
    assert_eq!(servers["repo-tool"]["enabled"], false);
    assert_eq!(
        servers["repo-tool"]["env"]["REPO_API_KEY"],
        "${REPO_API_KEY}"
    );
    assert!(servers.get("remote-docs").is_none());
    let o = f
        .cmd(&["mcp", "validate"])
        .current_dir(&f.ws)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The imported deny is in force; a command no rule names is not denied.
    let check = |cmdline: &str| {
        let o = f
            .cmd(&["permissions", "check", "-C", &ws, "--json", "--", cmdline])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["verdict"]["decision"].as_str().unwrap().to_string()
    };
    assert_eq!(check("curl https://example.com"), "deny");
    assert_eq!(check("ls"), "allow");
}

#[test]
fn an_unset_variable_in_an_mcp_env_fails_the_start_naming_it() {
    let f = Fixture::with_config("");
    std::fs::write(
        f.cw_home.join("mcp.json"),
        r#"{"mcpServers": {"s": {"command": "no-such-mcp-command-xyz", "env": {"TOKEN": "${CW_TEST_UNSET_VAR}"}}}}"#,
    )
    .unwrap();
    let list = |set: bool| {
        let mut c = f.cmd(&["mcp", "list", "--json", "-C", f.ws.to_str().unwrap()]);
        if set {
            c.env("CW_TEST_UNSET_VAR", "value");
        }
        let o = c.output().unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        (v, stderr(&o))
    };
    let (v, err) = list(false);
    let e = v["servers"][0]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        e.contains("${CW_TEST_UNSET_VAR}") && e.contains("TOKEN"),
        "{v} {err}"
    );
    // Positive control: with the variable set, the start gets past it.
    let (v, err) = list(true);
    let e = v["servers"][0]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(e.contains("command not found"), "{v} {err}");
}
