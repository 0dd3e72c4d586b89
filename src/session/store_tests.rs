use super::*;
use std::io::Write;

fn started(log: &mut SessionLog) {
    log.append(
        0,
        Event::ThreadStarted {
            cwd: "/w".into(),
            provider: "p".into(),
            model: "m".into(),
            approval: "auto".into(),
            sandbox: "workspace-write".into(),
            codewhale_version: "0".into(),
        },
    )
    .unwrap();
}

#[test]
fn sequence_is_global_and_every_line_terminated() {
    let t = tempfile::tempdir().unwrap();
    let mut log = SessionLog::create(t.path()).unwrap();
    started(&mut log);
    log.append(1, Event::TurnStarted).unwrap();
    log.append(1, Event::TurnCompleted).unwrap();
    log.append(2, Event::TurnStarted).unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(text.ends_with('\n'));
    let recs = read_records(log.path()).unwrap();
    let seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert!(recs.iter().all(|r| r.schema == SCHEMA && r.v == VERSION));
}

#[test]
fn live_file_is_not_recovered() {
    let t = tempfile::tempdir().unwrap();
    let mut log = SessionLog::create(t.path()).unwrap();
    started(&mut log);
    log.append(1, Event::TurnStarted).unwrap();
    #[cfg(unix)]
    assert_eq!(recover_file(log.path()).unwrap(), None);
}

#[test]
fn recovery_truncates_fragment_and_interrupts_turn() {
    let t = tempfile::tempdir().unwrap();
    let path = {
        let mut log = SessionLog::create(t.path()).unwrap();
        started(&mut log);
        log.append(1, Event::TurnStarted).unwrap();
        log.path().to_path_buf()
    };
    let fragment = br#"{"schema":"codewhale.session","v":1,"seq":3,"ts":"x","thr"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(fragment)
        .unwrap();
    let reports = recover_all(t.path()).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].truncated_bytes, fragment.len() as u64);
    assert_eq!(reports[0].interrupted_turn, Some(1));
    let recs = read_records(&path).unwrap();
    let seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        vec![1, 2, 3, 4, 5],
        "the fragment's seq 3 is reused by a committed record, never the fragment"
    );
    assert!(
        matches!(recs[2].event, Event::Recovered { truncated_bytes } if truncated_bytes == fragment.len() as u64)
    );
    assert!(matches!(recs[3].event, Event::TurnInterrupted { .. }));
    assert_eq!(recs[3].turn, 1);
    assert!(matches!(&recs[4].event, Event::ThreadCompleted { status } if status == "interrupted"));
    assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
    // Idempotent: a second start finds nothing to do.
    assert!(recover_all(t.path()).unwrap().is_empty());
}

#[test]
fn completed_thread_is_left_alone() {
    let t = tempfile::tempdir().unwrap();
    let path = {
        let mut log = SessionLog::create(t.path()).unwrap();
        started(&mut log);
        log.append(
            0,
            Event::ThreadCompleted {
                status: "completed".into(),
            },
        )
        .unwrap();
        log.path().to_path_buf()
    };
    let before = std::fs::read(&path).unwrap();
    assert!(recover_all(t.path()).unwrap().is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[cfg(unix)]
#[test]
fn sessions_dir_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("cw/sessions");
    let _log = SessionLog::create(&dir).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// A file written by session format v1 (the receipt fixture, recorded
/// before `enforced` existed) still reads, and a v2 record appended to it
/// (as recovery does) reads beside the old ones.
#[test]
fn version_1_records_still_read_beside_version_2() {
    use crate::host::{BackendKind, EnforcementLevel, EnforcementSummary, PartialItem, Shortfall};
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/receipt_fixtures/session.jsonl");
    let old = std::fs::read_to_string(&fixture).unwrap();
    assert!(
        old.lines().all(|l| l.contains(r#""v": 1"#)),
        "not a v1 fixture"
    );
    let recs = read_records(&fixture).unwrap();
    let shell = recs
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolResult {
                tool,
                enforcement,
                enforced,
                ..
            } if tool == "shell" => Some((enforcement.clone(), enforced.clone())),
            _ => None,
        })
        .expect("the fixture has a shell result");
    assert!(shell.0.as_deref().is_some_and(|l| l.starts_with("bwrap")));
    assert_eq!(shell.1, None);

    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("mixed.jsonl");
    let summary = EnforcementSummary {
        backend: BackendKind::Landlock,
        level: EnforcementLevel::Partial,
        partial: vec![PartialItem::at(
            Shortfall::WriteProtect,
            "/w/.git/hooks",
            "writable",
        )],
    };
    let last = recs.last().unwrap();
    let new = Record {
        schema: SCHEMA.into(),
        v: VERSION,
        seq: last.seq + 1,
        ts: "2026-12-01T00:00:00Z".into(),
        thread: last.thread.clone(),
        turn: 3,
        event: Event::ToolResult {
            call_id: "s9".into(),
            tool: "shell".into(),
            status: "ok".into(),
            exit_code: Some(0),
            duration_ms: 1,
            files_touched: Vec::new(),
            error_category: None,
            enforcement: Some("sandboxed: landlock+seccomp".into()),
            network: None,
            enforced: Some(summary.clone()),
            output: String::new(),
            truncated: false,
        },
    };
    let line = serde_json::to_string(&new).unwrap();
    assert!(
        line.contains(r#""item":"write-protect""#) && line.contains(r#""level":"partial""#),
        "{line}"
    );
    std::fs::write(&path, format!("{old}{line}\n")).unwrap();
    let mixed = read_records(&path).unwrap();
    assert_eq!(mixed.len(), recs.len() + 1);
    assert_eq!(mixed.last().unwrap(), &new);
    assert_eq!(VERSION, 2);
}

#[test]
fn only_what_precedes_a_side_effect_or_ends_a_turn_is_a_commit_point() {
    use super::record::Event;
    let call = Event::ToolCall {
        call_id: "c1".into(),
        tool: "shell".into(),
        args: serde_json::json!({"command": "true"}),
        mcp: None,
    };
    assert!(call.is_commit_point());
    assert!(Event::TurnCompleted.is_commit_point());
    assert!(!Event::TurnStarted.is_commit_point());
    assert!(!Event::AssistantMessage { text: "hi".into() }.is_commit_point());
    // A child's record is what its own record is.
    let wrapped = |e: Event| Event::Subagent {
        event_v: 1,
        agent_id: "a1".into(),
        record: Box::new(e),
    };
    assert!(wrapped(call).is_commit_point());
    assert!(!wrapped(Event::AssistantMessage { text: "hi".into() }).is_commit_point());
}
