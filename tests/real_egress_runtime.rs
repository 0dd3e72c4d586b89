#![cfg(not(feature = "nix-build-sandbox"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test target may panic
//! An egress refusal during a runtime turn, through the real path: `exec`
//! (a client of the runtime: its run is a thread in the shared event log)
//! asks the scripted model, which calls `shell` twice under
//! `--network=allowlist --allow-domain ok.test`, in every Linux tier. The
//! allowed request reaches the loopback origin (positive control) and is a
//! `sandbox_allowed` stream-json event and a `sandbox.allowed` runtime
//! event (host, port, rule, bytes each way, on its call's item); the
//! refused one never does, and appears as a `sandbox.denied` event in the
//! runtime event log (host, port, rule, on the shell call's item), as a
//! `sandbox_denied` event in stream-json, and in the receipt's network line.

mod common;

use common::cli::{stderr, stdout_lines, Fixture};
use common::egress::Origin;
use common::sandbox::tiers;
use common::scripted_model::{call, reply, ScriptedModel, Wire};
use serde_json::{json, Value};

fn runtime_events(f: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(f.cw_home.join("runtime").join("events.jsonl"))
        .expect("runtime log")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_connection_in_a_turn_is_an_event_in_log_and_stream_and_in_the_receipt() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let origin = rt.block_on(Origin::start("origin"));
    let port = origin.port();
    for tier in tiers() {
        let model = ScriptedModel::start(
            Wire::OpenAi,
            vec![
                call(
                    "ok",
                    "shell",
                    json!({"command": format!("curl -sS --max-time 10 http://ok.test:{port}/")}),
                ),
                call(
                    "bad",
                    "shell",
                    json!({"command": format!("curl -sS --max-time 5 http://evil.test:{port}/")}),
                ),
                reply("done"),
            ],
        );
        let f = Fixture::new(&model, "");
        let before = origin.accepted();
        let mut c = f.cmd(&[
            "exec",
            "--auto",
            "--provider",
            "custom",
            "--backend",
            tier.backend,
            "--network=allowlist",
            "--allow-domain",
            "ok.test",
            "--output-format",
            "stream-json",
            "go",
        ]);
        for d in ["tmp", "xdg"] {
            std::fs::create_dir_all(f.root.join(d)).unwrap();
        }
        c.env("TMPDIR", f.root.join("tmp"))
            .env("XDG_RUNTIME_DIR", f.root.join("xdg"))
            .env(
                "CODEWHALE_TEST_RESOLVE",
                "ok.test=127.0.0.1!loopback;evil.test=127.0.0.1!loopback",
            );
        if common::sandbox::no_bwrap() {
            c.env("PATH", common::sandbox::path_without_bwrap());
        }
        let o = c.output().unwrap();
        let tag = tier.name;
        assert_eq!(o.status.code(), Some(0), "[{tag}] {}", stderr(&o));
        assert_eq!(
            origin.accepted(),
            before + 1,
            "[{tag}] only the allowed request reached the origin"
        );

        // stream-json: the allowed call printed the origin's answer; the
        // refused one has its own sandbox_denied event.
        let stream = stdout_lines(&o);
        let thread = stream[0]["thread"].as_str().unwrap().to_string();
        let of = |ty: &str, call: &str| -> Vec<Value> {
            stream
                .iter()
                .filter(|e| e["type"] == ty && e["call_id"] == call)
                .cloned()
                .collect()
        };
        let ok = &of("tool_result", "ok")[0];
        assert!(
            ok["output"].as_str().unwrap().contains("hello from origin"),
            "[{tag}] {ok}"
        );
        assert!(of("sandbox_denied", "ok").is_empty(), "[{tag}]");
        // The allowed connection is its own event, with the bytes the
        // proxy relayed each way: the request up, the origin's answer down.
        assert!(of("sandbox_allowed", "bad").is_empty(), "[{tag}]");
        let allowed = of("sandbox_allowed", "ok");
        assert_eq!(allowed.len(), 1, "[{tag}] {stream:?}");
        let a = &allowed[0];
        assert_eq!(a["kind"], "network", "[{tag}] {a}");
        assert_eq!(a["host"], "ok.test");
        assert_eq!(a["port"], port);
        assert_eq!(a["decision"], "allowed");
        assert_eq!(a["rule"], "allow: ok.test");
        assert_eq!(a["protocol"], "http-forward");
        assert_eq!(a["addr"], format!("127.0.0.1:{port}"));
        assert_eq!(a["error"], Value::Null, "[{tag}] {a}");
        let (up, down) = (
            a["bytes_up"].as_u64().unwrap(),
            a["bytes_down"].as_u64().unwrap(),
        );
        // `GET / HTTP/1.1` + Host alone is over 30 bytes; the answer holds
        // its status line, headers and `hello from origin\n`.
        assert!(up > 30, "[{tag}] {a}");
        assert!(
            down > "hello from origin\n".len() as u64 + 17,
            "[{tag}] {a}"
        );
        let denied = of("sandbox_denied", "bad");
        assert_eq!(denied.len(), 1, "[{tag}] {stream:?}");
        let d = &denied[0];
        assert_eq!(d["kind"], "network", "[{tag}] {d}");
        assert_eq!(d["host"], "evil.test");
        assert_eq!(d["port"], port);
        assert_eq!(d["rule"], "not in the allow list");
        assert_eq!(d["protocol"], "http-forward");
        assert_eq!(d["inferred"], false);
        assert_eq!(d["decision"], "refused");
        assert_eq!(
            (d["bytes_up"].as_u64(), d["bytes_down"].as_u64()),
            (Some(0), Some(0))
        );
        let bad = &of("tool_result", "bad")[0];
        let label = bad["enforcement"].as_str().unwrap();
        assert!(
            label.ends_with("; network: 1 refused: evil.test (not in the allow list)"),
            "[{tag}] {label}"
        );

        // The runtime event log: sandbox.denied on the refused call's item.
        let ev = runtime_events(&f);
        let sd: Vec<&Value> = ev
            .iter()
            .filter(|e| e["event"] == "sandbox.denied")
            .collect();
        assert_eq!(sd.len(), 1, "[{tag}] {ev:?}");
        let p = &sd[0]["payload"];
        assert_eq!(sd[0]["thread_id"], thread.as_str());
        assert_eq!(p["call_id"], "bad", "[{tag}] {p}");
        assert_eq!(p["tool"], "shell");
        assert_eq!(p["kind"], "network");
        assert_eq!(p["host"], "evil.test");
        assert_eq!(p["port"], port);
        assert_eq!(p["rule"], "not in the allow list");
        assert!(p["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("evil.test:{port}")));
        let item_of = |call: &str| {
            ev.iter()
                .find(|e| {
                    e["event"] == "item.started"
                        && e["payload"]["item"]["metadata"]["call_id"] == call
                })
                .map(|e| e["payload"]["item"]["id"].as_str().unwrap().to_string())
        };
        let item = sd[0]["item_id"].as_str().unwrap();
        assert_eq!(item_of("bad").as_deref(), Some(item), "[{tag}] {ev:?}");

        // ... and sandbox.allowed on the allowed call's item, the same
        // facts as the stream-json event.
        let sa: Vec<&Value> = ev
            .iter()
            .filter(|e| e["event"] == "sandbox.allowed")
            .collect();
        assert_eq!(sa.len(), 1, "[{tag}] {ev:?}");
        let p = &sa[0]["payload"];
        assert_eq!(
            sa[0]["item_id"].as_str(),
            item_of("ok").as_deref(),
            "[{tag}]"
        );
        assert_eq!(p["call_id"], "ok", "[{tag}] {p}");
        for k in [
            "kind",
            "host",
            "port",
            "decision",
            "rule",
            "protocol",
            "addr",
            "bytes_up",
            "bytes_down",
        ] {
            assert_eq!(p[k], a[k], "[{tag}] {k}: {p}");
        }

        // The receipt: the label stays the posture, the command carries
        // its own network line.
        let r = f
            .cmd(&["receipts", &thread, "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
        let receipt: Value = serde_json::from_slice(&r.stdout).unwrap();
        let actions = receipt["actions"].as_array().unwrap();
        let by_call = |id: &str| actions.iter().find(|a| a["call_id"] == id).unwrap();
        assert_eq!(
            by_call("bad")["network"],
            "network: 1 refused: evil.test (not in the allow list)",
            "[{tag}] {receipt}"
        );
        assert_eq!(by_call("ok")["network"], "network: 1 connection to ok.test");
        let postures = receipt["postures"]["enforcement"].as_array().unwrap();
        assert!(
            postures
                .iter()
                .all(|l| !l.as_str().unwrap().contains("network:")),
            "[{tag}] {postures:?}"
        );
        let md = f.cmd(&["receipts", &thread]).output().unwrap();
        let md = String::from_utf8_lossy(&md.stdout);
        assert!(
            md.contains("network: 1 refused: evil.test (not in the allow list)"),
            "[{tag}] {md}"
        );
    }
}
