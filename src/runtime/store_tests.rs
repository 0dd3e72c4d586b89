//! The runtime handle against a real log directory: records, restart,
//! subscribers and the settlement owner.

use super::*;
use crate::runtime::model::RESTART_ERROR;
use crate::runtime::pending::SettleError;
use std::time::Duration;

fn thread(rt: &Runtime) -> ThreadRecord {
    rt.create_thread(NewThread {
        model: "m".into(),
        workspace: std::env::temp_dir(),
        mode: ThreadMode::Agent,
        allow_shell: true,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn records_survive_a_restart_and_open_turns_are_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (turn_id, item_id) = {
        let (rt, report) = Runtime::open_dir(dir.path()).unwrap();
        assert_eq!(report, OpenReport::default());
        let t = thread(&rt);
        let turn = rt.start_turn(&t.id, Some("p"), Some("m"), None).unwrap();
        assert!(matches!(
            rt.start_turn(&t.id, None, None, None),
            Err(RuntimeError::Busy(_))
        ));
        let item = rt
            .start_item(&turn, ItemKind::AgentMessage, json!({}))
            .unwrap();
        rt.item_delta(&turn, &item, "hello").unwrap();
        (turn.id, item.id)
        // Dropped without finishing: like a killed process.
    };
    let (rt, report) = Runtime::open_dir(dir.path()).unwrap();
    assert_eq!(report.interrupted_turns, vec![turn_id.clone()]);
    let turn = rt.turn(&turn_id).unwrap();
    assert_eq!(turn.status, TurnStatus::Interrupted);
    assert_eq!(turn.error.as_deref(), Some(RESTART_ERROR));
    let item = rt.read(|s| s.items[&item_id].clone());
    assert_eq!(item.status, ItemStatus::Interrupted);
    assert_eq!(item.metadata["text"], "hello", "the durable prefix stays");
    // A second start finds nothing to repair.
    drop(rt);
    let (_, report) = Runtime::open_dir(dir.path()).unwrap();
    assert!(report.interrupted_turns.is_empty());
}

#[test]
fn a_claimed_threads_open_turn_is_not_interrupted_by_another_start() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    rt.claim(&t.id).unwrap();
    let turn = rt.start_turn(&t.id, None, None, None).unwrap();
    // Another opener (a second process would be the same: the lock is an
    // flock on its own open file description).
    let (other, report) = Runtime::open_dir(dir.path()).unwrap();
    assert!(report.interrupted_turns.is_empty());
    assert_eq!(other.turn(&turn.id).unwrap().status, TurnStatus::InProgress);
    // Positive control: once released, a start interrupts it.
    rt.release(&t.id);
    let (third, report) = Runtime::open_dir(dir.path()).unwrap();
    assert_eq!(report.interrupted_turns, vec![turn.id.clone()]);
    assert_eq!(
        third.turn(&turn.id).unwrap().status,
        TurnStatus::Interrupted
    );
}

#[test]
fn patch_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    let err = rt.update_thread(&t.id, ThreadPatch::default()).unwrap_err();
    assert!(err.to_string().contains("at least one field"), "{err}");
    let p = ThreadPatch {
        title: Some("hi".into()),
        system_prompt: Some("be brief".into()),
        ..Default::default()
    };
    assert_eq!(
        rt.update_thread(&t.id, p).unwrap().title.as_deref(),
        Some("hi")
    );
    let p = ThreadPatch {
        title: Some(String::new()),
        ..Default::default()
    };
    let u = rt.update_thread(&t.id, p).unwrap();
    assert_eq!(u.title, None, "empty string clears");
    assert_eq!(u.system_prompt.as_deref(), Some("be brief"), "untouched");
    let bad: Result<ThreadPatch, _> = serde_json::from_value(json!({"titel": "x"}));
    assert!(bad.unwrap_err().to_string().contains("titel"));
    let p = ThreadPatch {
        mode: Some("yolo".into()),
        ..Default::default()
    };
    assert!(rt
        .update_thread(&t.id, p)
        .unwrap_err()
        .to_string()
        .starts_with("mode:"));
    let f = rt.fork_thread(&t.id).unwrap();
    assert_ne!(f.id, t.id);
    let ev = rt.read(|s| s.thread_events[&f.id][0].clone());
    assert_eq!(ev.event, "thread.forked");
    assert_eq!(ev.payload["source_thread_id"], t.id.as_str());
}

#[tokio::test]
async fn subscribers_replay_then_follow_and_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    let other = thread(&rt);
    let turn = rt.start_turn(&t.id, None, None, None).unwrap();
    rt.start_turn(&other.id, None, None, None).unwrap();
    let mut subs: Vec<Subscription> = (0..8).map(|_| rt.subscribe(&t.id, 0, None)).collect();
    let rt2 = rt.clone();
    let tid = turn.id.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let turn = rt2.turn(&tid).unwrap();
        for i in 0..50 {
            let item = rt2
                .start_item(&turn, ItemKind::Status, json!({"i": i}))
                .unwrap();
            rt2.finish_item(&turn, &item.id, ItemStatus::Completed, json!({}))
                .unwrap();
        }
        rt2.finish_turn(&tid, TurnStatus::Completed, None).unwrap();
    });
    let mut seen: Vec<Vec<u64>> = Vec::new();
    for s in &mut subs {
        let mut seqs = Vec::new();
        let mut prev = 0;
        while seqs.len() < 2 + 100 + 1 {
            for e in s.next().await.unwrap() {
                assert_eq!(e["thread_id"], t.id.as_str());
                assert_eq!(e["previous_seq"].as_u64().unwrap(), prev);
                prev = e["seq"].as_u64().unwrap();
                seqs.push(prev);
            }
        }
        seen.push(seqs);
    }
    writer.await.unwrap();
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "identical sequences");
    assert!(seen[0].windows(2).all(|w| w[0] < w[1]));
    // Gaps are the other thread's events (seq is global).
    assert!(seen[0][1] > seen[0][0] + 1);
    // Replay from every cursor gives exactly the suffix.
    let all = seen[0].clone();
    for (i, c) in all.iter().enumerate() {
        let mut s = rt.subscribe(&t.id, *c, None);
        let mut got = Vec::new();
        loop {
            let b = s.durable_batch();
            if b.is_empty() {
                break;
            }
            got.extend(b.iter().map(|e| e["seq"].as_u64().unwrap()));
        }
        assert_eq!(got, all[i + 1..].to_vec(), "cursor {c}");
    }
    // The newest tail: previous_seq names the last omitted event.
    let mut s = rt.subscribe(&t.id, 0, Some(3));
    let b = s.durable_batch();
    assert_eq!(b.len(), 3);
    assert_eq!(b[0]["previous_seq"].as_u64().unwrap(), all[all.len() - 4]);
}

#[tokio::test]
async fn an_answer_is_durable_before_the_engine_sees_it_and_settles_once() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    let turn = rt.start_turn(&t.id, None, None, None).unwrap();
    let mut sub = rt.subscribe(&t.id, 0, None);
    let rt2 = rt.clone();
    let turn2 = turn.clone();
    let engine = tokio::spawn(async move {
        rt2.request(
            RequestKind::Approval,
            &turn2,
            None,
            json!({"tool": "shell"}),
            Duration::from_secs(30),
        )
        .await
        .unwrap()
    });
    let id = loop {
        let b = sub.next().await.unwrap();
        if let Some(e) = b.iter().find(|e| e["event"] == "approval.required") {
            break e["payload"]["approval_id"].as_str().unwrap().to_string();
        }
    };
    assert!(
        rt.read(|s| s.open_requests.contains_key(&id)),
        "in the snapshot"
    );
    let answer = Settlement::Answered(Answer::Approval {
        allow: true,
        remember: false,
    });
    // Wrong kind and unknown ids never reach the engine.
    assert!(rt
        .settle(&id, Some(RequestKind::ToolCall), None, None, answer.clone())
        .is_err());
    assert!(rt
        .settle("appr_nope", None, None, None, answer.clone())
        .is_err());
    rt.settle(&id, Some(RequestKind::Approval), None, None, answer.clone())
        .unwrap();
    let (got_id, got) = engine.await.unwrap();
    assert_eq!(got_id, id);
    assert_eq!(got, answer);
    // The terminal event is on disk (the engine only heard after commit).
    let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert_eq!(text.matches("approval.decided").count(), 1);
    // A repeat is refused and adds nothing.
    let again = rt.settle(&id, None, None, None, answer);
    assert!(matches!(
        again,
        Err(RuntimeError::Settle(SettleError::AlreadySettled(_)))
    ));
    let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert_eq!(text.matches("approval.decided").count(), 1);
    assert!(rt.read(|s| s.open_requests.is_empty()));
}

#[tokio::test]
async fn a_timeout_denies_as_no_response_and_a_late_answer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    let turn = rt.start_turn(&t.id, None, None, None).unwrap();
    let (id, how) = rt
        .request(
            RequestKind::Approval,
            &turn,
            None,
            json!({}),
            Duration::from_millis(20),
        )
        .await
        .unwrap();
    assert_eq!(how, Settlement::TimedOut);
    let ev = rt.read(|s| s.thread_events[&t.id].last().unwrap().clone());
    assert_eq!(ev.event, "approval.timeout");
    assert_eq!(ev.payload["decided_by"], "no response");
    assert_eq!(ev.payload["decision"], "deny");
    let late = Settlement::Answered(Answer::Approval {
        allow: true,
        remember: false,
    });
    assert!(rt.settle(&id, None, None, None, late).is_err());
}

#[tokio::test]
async fn finishing_the_turn_cancels_its_requests_once() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    let turn = rt.start_turn(&t.id, None, None, None).unwrap();
    let rt2 = rt.clone();
    let turn2 = turn.clone();
    let engine = tokio::spawn(async move {
        rt2.request(
            RequestKind::ToolCall,
            &turn2,
            None,
            json!({"call_id": "c1"}),
            Duration::from_secs(30),
        )
        .await
        .unwrap()
    });
    while !rt.is_pending("c1") {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rt.finish_turn(&turn.id, TurnStatus::Interrupted, Some("stop".into()))
        .unwrap();
    let (_, how) = engine.await.unwrap();
    assert!(matches!(how, Settlement::Canceled(_)));
    let names: Vec<String> = rt.read(|s| {
        s.thread_events[&t.id]
            .iter()
            .map(|e| e.event.clone())
            .collect()
    });
    assert_eq!(
        names.iter().filter(|n| *n == "tool_call.canceled").count(),
        1
    );
    assert_eq!(names.last().unwrap(), "turn.completed");
    let pos = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(pos("tool_call.canceled") < pos("turn.completed"));
}

#[test]
fn patching_the_provider_clears_a_model_of_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    let t = thread(&rt);
    assert_eq!(t.provider, None);
    let set = |provider: &str, model: Option<&str>| ThreadPatch {
        provider: Some(provider.into()),
        model: model.map(str::to_string),
        ..Default::default()
    };
    // A new provider without a model: its default model (empty = default).
    let u = rt.update_thread(&t.id, set("openai", None)).unwrap();
    assert_eq!(u.provider.as_deref(), Some("openai"));
    assert_eq!(u.model, "");
    // With a model: both.
    let u = rt
        .update_thread(&t.id, set("ollama", Some("qwen:7b")))
        .unwrap();
    assert_eq!(
        (u.provider.as_deref(), u.model.as_str()),
        (Some("ollama"), "qwen:7b")
    );
    // The same provider again keeps the model.
    let u = rt.update_thread(&t.id, set("ollama", None)).unwrap();
    assert_eq!(u.model, "qwen:7b");
    // Empty: back to the configured provider (and its default model).
    let u = rt.update_thread(&t.id, set("", None)).unwrap();
    assert_eq!((u.provider, u.model.as_str()), (None, ""));
    // Not an id: refused by field name.
    let err = rt.update_thread(&t.id, set("a b", None)).unwrap_err();
    assert!(err.to_string().starts_with("provider:"), "{err}");
    // The record round-trips; no `provider` key when unset.
    let v = serde_json::to_value(rt.update_thread(&t.id, set("xai", None)).unwrap()).unwrap();
    assert_eq!(v["provider"], "xai");
    let v = serde_json::to_value(rt.update_thread(&t.id, set("", None)).unwrap()).unwrap();
    assert!(v.get("provider").is_none(), "{v}");
}

/// A thread's workspace is checked by the runtime itself (every client
/// goes through here): an existing directory, recorded canonical, never a
/// system directory; the error names the field.
#[test]
fn create_thread_checks_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _) = Runtime::open_dir(&dir.path().join("rt")).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let new = |w: std::path::PathBuf| NewThread {
        model: "m".into(),
        workspace: w,
        ..Default::default()
    };
    // Canonical: `ws/sub/..` is recorded as `ws`.
    let t = rt.create_thread(new(ws.join("sub/.."))).unwrap();
    assert_eq!(t.workspace, std::fs::canonicalize(&ws).unwrap());
    assert_eq!(t.mode, ThreadMode::Agent);
    for (bad, why) in [
        (ws.join("missing"), "is not a directory"),
        (ws.join("sub/../file"), "is not a directory"),
        ("/".into(), "is a system directory"),
        ("/etc".into(), "is a system directory"),
        ("/proc/self".into(), "is a system directory"),
        ("/usr/..".into(), "is a system directory"),
    ] {
        if bad.ends_with("file") {
            std::fs::write(ws.join("file"), "x").unwrap();
        }
        match rt.create_thread(new(bad.clone())) {
            Err(RuntimeError::Invalid { field, message }) => {
                assert_eq!(field, "workspace", "{bad:?}");
                assert!(message.contains(why), "{bad:?}: {message}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn a_thread_mode_names_its_field_and_values() {
    assert_eq!(ThreadMode::parse("mode", "chat").unwrap(), ThreadMode::Chat);
    match ThreadMode::parse("mode", "agnet") {
        Err(RuntimeError::Invalid { field, message }) => {
            assert_eq!(field, "mode");
            assert_eq!(
                message,
                "`agnet` is not one of plan, work (or agent), operate, chat"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(serde_json::to_value(ThreadMode::Chat).unwrap(), "chat");
    // Operate's contract: plan, work (`agent` its old name), operate.
    for (v, m, posture) in [
        ("plan", ThreadMode::Plan, Some(crate::authz::Mode::Plan)),
        ("work", ThreadMode::Agent, Some(crate::authz::Mode::Work)),
        ("agent", ThreadMode::Agent, Some(crate::authz::Mode::Work)),
        (
            "operate",
            ThreadMode::Operate,
            Some(crate::authz::Mode::Operate),
        ),
        ("chat", ThreadMode::Chat, None),
    ] {
        assert_eq!(ThreadMode::parse("mode", v).unwrap(), m, "{v}");
        assert_eq!(m.posture_mode(), posture, "{v}");
    }
    assert_eq!(
        serde_json::to_value(ThreadMode::Operate).unwrap(),
        "operate"
    );
    // A stored or sent `work` reads as the Work thread it is.
    let w: ThreadMode = serde_json::from_value(serde_json::json!("work")).unwrap();
    assert_eq!(w, ThreadMode::Agent);
}

#[test]
fn a_tasks_thread_keeps_its_task_id_across_a_restart_and_a_fork_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
        let t = rt
            .create_thread(NewThread {
                model: "m".into(),
                workspace: std::env::temp_dir(),
                task_id: Some("tsk_1".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(t.task_id.as_deref(), Some("tsk_1"));
        assert_eq!(rt.fork_thread(&t.id).unwrap().task_id, None);
        assert_eq!(thread(&rt).task_id, None, "a thread of its own");
        t.id
    };
    let (rt, _) = Runtime::open_dir(dir.path()).unwrap();
    assert_eq!(rt.thread(&id).unwrap().task_id.as_deref(), Some("tsk_1"));
}
