#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! `codewhale sandbox run --backend opensandbox` end to end: the real CLI
//! binary, its config file, and the fake OpenSandbox server (real HTTP on
//! 127.0.0.1, real `sh` processes standing for the remote sandbox).
#![cfg(unix)]

use crate::common;
use common::{fake_opensandbox, opensandbox_env};

use fake_opensandbox::{API_KEY, EXECD_TOKEN};
use opensandbox_env::Env;
use std::fs;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_codewhale");

struct Cli {
    rt: tokio::runtime::Runtime,
    env: Env,
}

impl Cli {
    fn start() -> Cli {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let env = rt.block_on(Env::start(|_| {}));
        let cw_home = env.tmp.path().join("cw-home");
        fs::create_dir_all(&cw_home).unwrap();
        let remote = env.remote_ws.parent().unwrap();
        fs::write(
            cw_home.join("config.toml"),
            format!(
                "[sandbox]\nbackend = \"opensandbox\"\n[opensandbox]\nurl = \"{}\"\napi_key = \"{API_KEY}\"\nexecd_access_token = \"{EXECD_TOKEN}\"\nremote_workdir = \"{}\"\nremote_tmp = \"{}\"\npoll_interval_ms = 20\n",
                env.fake.lifecycle_url,
                remote.join("workspace").display(),
                remote.join("tmp").display(),
            ),
        )
        .unwrap();
        Cli { rt, env }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .args(["sandbox", "run", "--sandbox", "workspace-write", "-C"])
            .arg(&self.env.ws)
            .args(args)
            .env("HOME", self.env.tmp.path().join("home"))
            .env("CODEWHALE_HOME", self.env.tmp.path().join("cw-home"))
            .env_remove("OPEN_SANDBOX_API_KEY")
            .env_remove("CODEWHALE_SANDBOX_API_KEY")
            .output()
            .unwrap()
    }
}

#[test]
fn exit_code_output_and_sync_back_through_the_cli() {
    let cli = Cli::start();
    let out = cli.run(&["--", "sh", "-c", "echo hi > f && cat f && exit 3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "hi");
    // The file was written remotely and synced back to the host workspace.
    assert_eq!(fs::read_to_string(cli.env.ws.join("f")).unwrap(), "hi\n");
    drop(cli.rt);
}

#[test]
fn protected_path_written_remotely_is_not_synced_back() {
    let cli = Cli::start();
    fs::create_dir_all(cli.env.ws.join(".git/hooks")).unwrap();
    let out = cli.run(&[
        "--report-json",
        cli.env.tmp.path().join("report.json").to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo evil > .git/hooks/pre-commit && echo ok > allowed.txt",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Positive control: the ordinary file came back.
    assert_eq!(
        fs::read_to_string(cli.env.ws.join("allowed.txt")).unwrap(),
        "ok\n"
    );
    // The hook exists remotely but not on the host.
    assert!(cli.env.remote_ws.join(".git/hooks/pre-commit").exists());
    assert!(!cli.env.ws.join(".git/hooks/pre-commit").exists());
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(cli.env.tmp.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["enforcement"]["backend"], "opensandbox");
    assert_eq!(report["enforcement"]["level"], "external");
    let refused = report["enforcement"]["external"]["sync_refused"].to_string();
    assert!(refused.contains("pre-commit"), "{refused}");
}

#[test]
fn timeout_interrupts_the_remote_command() {
    let cli = Cli::start();
    let out = cli.run(&["--timeout-ms", "700", "--", "sleep", "30"]);
    assert_eq!(
        out.status.code(),
        Some(124),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !cli.env.fake.interrupted().is_empty(),
        "the fake server saw no DELETE /command"
    );
}

/// The issue #14 reproduction, verbatim: against a fake that parses the
/// upload form as Go's `mime/multipart` does (a part without a filename is
/// a value, invisible to execd), a `workspace-write` run uploads, runs,
/// prints, exits with the command's code and syncs the new file back.
#[test]
fn workspace_write_run_against_an_execd_that_parses_multipart_like_go() {
    let cli = Cli::start();
    fs::write(cli.env.ws.join("input.txt"), "uploaded\n").unwrap();
    let out = cli.run(&[
        "--backend",
        "opensandbox",
        "--",
        "sh",
        "-c",
        "echo hi; echo f > f; exit 3",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(fs::read_to_string(cli.env.ws.join("f")).unwrap(), "f\n");
    let sh = cli.env.fake.state.lock();
    assert!(
        !sh.upload_metadata.is_empty(),
        "nothing was uploaded through /files/upload"
    );
    assert!(
        sh.upload_value_parts.is_empty(),
        "parts without a filename (execd ignores them): {:?}",
        sh.upload_value_parts
    );
}
