#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! The sandbox says what happened (src/host/hints.rs): a run whose change
//! the after-run check reverted says so on stderr with the quarantined
//! copy; a command that fails like a program without a network, with the
//! network off, gets a line naming `--allow-domain` / `--network`; a write
//! refused outside the writable roots gets one naming `--writable-root`.
//! The model sees the same lines in the shell tool's result. Before, all
//! of these were silent (shared/research/real-workloads.md D3, D5).
//! Also the `--allow-domain` input rules (D6).

mod common;

use common::sandbox::*;

fn ww(tier: &'static Tier) -> Case {
    Case {
        tier,
        mode: Mode::Ww,
    }
}

#[test]
fn a_reverted_write_is_named_on_stderr() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        let r = fx.sh(
            &case,
            "mkdir -p .vscode && echo '{}' > .vscode/settings.json && echo written",
        );
        assert!(r.ok() && r.stdout.contains("written"), "[{case}] {r:?}");
        assert!(!fx.ws.join(".vscode").exists(), "[{case}] not reverted");
        let line = r
            .stderr
            .lines()
            .find(|l| l.starts_with("codewhale: reverted after the run: "))
            .unwrap_or_else(|| panic!("[{case}] no revert line: {}", r.stderr));
        assert!(line.contains(".vscode"), "[{case}] {line}");
        // The quarantined copy is named, and exists.
        let q = r.enforcement()["reverted"][0]["quarantined_to"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(line.contains(&q), "[{case}] {line}");
        assert!(std::path::Path::new(&q).exists(), "[{case}] {q}");
        // Positive control: a run that touches nothing protected says nothing.
        let quiet = fx.sh(&case, "echo hi > plain.txt");
        assert!(!quiet.stderr.contains("reverted"), "[{case}] {quiet:?}");
    }
}

#[test]
fn network_off_failures_say_the_network_was_off() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        // A real name lookup with the network off (the sandbox's namespace
        // has no route; without one, seccomp refuses the socket).
        let r = fx.run(
            &case,
            &[],
            &[
                "python3",
                "-c",
                "import socket; socket.getaddrinfo('registry.invalid', 443)",
            ],
        );
        assert!(!r.ok(), "[{case}] {r:?}");
        assert!(
            r.stderr
                .contains("codewhale: the sandbox's network was off")
                && r.stderr.contains("--allow-domain")
                && r.stderr.contains("--network"),
            "[{case}] {}",
            r.stderr
        );
        // The package managers' retries are off (they cannot succeed).
        let env = fx.sh(
            &case,
            "echo $npm_config_fetch_retries/$CARGO_NET_RETRY/$PIP_RETRIES",
        );
        assert_eq!(env.stdout.trim(), "0/0/0", "[{case}] {env:?}");
        // Control: a failure that is not about the network gets no such line,
        // and with the network on nothing is set.
        let other = fx.sh(&case, "echo 'no such file' >&2; exit 3");
        assert!(
            !other.stderr.contains("network was off"),
            "[{case}] {other:?}"
        );
        let on = fx.run(
            &case,
            &["--network"],
            &["sh", "-c", "echo x${PIP_RETRIES}x"],
        );
        assert_eq!(on.stdout.trim(), "xx", "[{case}] {on:?}");
    }
}

#[test]
fn a_write_outside_the_roots_names_writable_root() {
    for tier in tiers() {
        let case = ww(tier);
        let fx = Fx::new();
        // $HOME is readable in the sandbox but not a writable root.
        let r = fx.sh(&case, "mkdir \"$HOME/made-here\"");
        assert!(!r.ok(), "[{case}] {r:?}");
        let target = fx.home.join("made-here");
        assert!(!target.exists());
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains("outside the sandbox's writable roots"))
            .unwrap_or_else(|| panic!("[{case}] no hint: {}", r.stderr));
        assert!(
            line.contains(&target.display().to_string()) && line.contains("--writable-root"),
            "[{case}] {line}"
        );
        // Positive control: with the root added, the same command works.
        let home = fx.home.to_string_lossy().into_owned();
        let ok = fx.run(
            &case,
            &["--writable-root", &home],
            &["sh", "-c", "mkdir \"$HOME/made-here\""],
        );
        assert!(ok.ok(), "[{case}] {ok:?}");
        assert!(target.is_dir());
        assert!(!ok.stderr.contains("writable roots"), "[{case}] {ok:?}");
    }
}

#[test]
fn allow_domain_input_is_taken_or_refused_with_the_reason() {
    let fx = Fx::new();
    let run = |d: &str| {
        let out = std::process::Command::new(BIN)
            .args(["sandbox", "explain", "--json", "--allow-domain", d, "-C"])
            .arg(&fx.ws)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run("https://pypi.org/simple/");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("taking the URL's host: pypi.org"), "{err}");
    assert!(out.contains("\"pypi.org\""), "{out}");
    for (d, why) in [
        ("registry.npmjs.org,pypi.org", "repeat it"),
        ("localhost", "loopback"),
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("203.0.113.7", "IP literal"),
    ] {
        let (code, _, err) = run(d);
        assert_ne!(code, Some(0), "{d} accepted");
        assert!(err.contains(why), "{d}: {err}");
    }
}
