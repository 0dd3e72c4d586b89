//! The event log against real files: commit markers, torn tails, loud
//! failures, restart, and two writers on one file.

use super::*;
use serde_json::json;

fn ev(n: u32) -> NewEvent {
    NewEvent::thread("thread.updated", "thr_a", json!({"n": n}))
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn appends_are_newline_terminated_and_sequenced_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, recs, torn) = EventLog::open(dir.path()).unwrap();
    assert!(recs.is_empty() && torn.is_none());
    let (foreign, mine) = log.append(vec![ev(1), ev(2)]).unwrap();
    assert!(foreign.is_empty());
    assert_eq!(mine.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
    drop(log);
    let (mut log, recs, torn) = EventLog::open(dir.path()).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(torn.is_none());
    assert_eq!(recs[1].payload["n"], 2);
    let (_, mine) = log.append(vec![ev(3)]).unwrap();
    assert_eq!(mine[0].seq, 3);
    let on_disk = lines(log.path());
    assert_eq!(on_disk.len(), 3);
    assert_eq!(on_disk[2]["schema"], LOG_SCHEMA);
}

#[test]
fn a_torn_tail_that_parses_is_still_cut_and_its_seq_is_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = EventLog::open(dir.path()).unwrap();
    log.append(vec![ev(1), ev(2)]).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    // A complete JSON object without its newline: an uncommitted append.
    let fragment = r#"{"seq":3,"schema":"codewhale.runtime-events","v":1,"ts":"2026-01-01T00:00:00.000Z","event":"thread.updated","thread_id":"thr_a","turn_id":null,"item_id":null,"payload":{"n":3}}"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(fragment.as_bytes())
        .unwrap();
    let (mut log, recs, torn) = EventLog::open(dir.path()).unwrap();
    assert_eq!(recs.len(), 2, "the fragment is not replayed");
    let torn = torn.expect("torn tail reported");
    assert_eq!(torn.truncated_bytes, fragment.len() as u64);
    assert_eq!(torn.skipped_seq, 3);
    let on_disk = lines(&path);
    assert_eq!(on_disk.len(), 3, "the fragment is gone, a marker was added");
    assert_eq!(on_disk[2]["event"], "runtime.recovered");
    assert_eq!(on_disk[2]["seq"], 4);
    assert_eq!(on_disk[2]["payload"]["skipped_seq"], 3);
    let (_, mine) = log.append(vec![ev(5)]).unwrap();
    assert_eq!(mine[0].seq, 5);
    drop(log);
    // And after another restart the numbers still only go up.
    let (mut log, recs, torn) = EventLog::open(dir.path()).unwrap();
    assert!(torn.is_none());
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 4, 5]);
    assert_eq!(log.append(vec![ev(6)]).unwrap().1[0].seq, 6);
}

#[test]
fn a_fragment_without_a_readable_seq_skips_the_next_number() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = EventLog::open(dir.path()).unwrap();
    log.append(vec![ev(1)]).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"se")
        .unwrap();
    let (mut log, _, torn) = EventLog::open(dir.path()).unwrap();
    assert_eq!(torn.unwrap().skipped_seq, 2);
    assert_eq!(log.append(vec![ev(2)]).unwrap().1[0].seq, 4);
}

#[test]
fn a_terminated_malformed_line_fails_replay_loudly_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = EventLog::open(dir.path()).unwrap();
    log.append(vec![ev(1)]).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"seq\":2,\"oops\n")
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = EventLog::open(dir.path()).err().expect("replay must fail");
    let msg = err.to_string();
    assert!(msg.contains("line 2"), "{msg}");
    assert!(msg.contains("events.jsonl"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing rewritten");
}

#[test]
fn a_seq_that_does_not_increase_fails_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = EventLog::open(dir.path()).unwrap();
    log.append(vec![ev(1), ev(2)]).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    let first = text.lines().next().unwrap();
    std::fs::write(&path, format!("{text}{first}\n")).unwrap();
    let msg = EventLog::open(dir.path()).err().unwrap().to_string();
    assert!(
        msg.contains("line 3") && msg.contains("does not increase"),
        "{msg}"
    );
}

#[test]
fn two_writers_share_one_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, _, _) = EventLog::open(dir.path()).unwrap();
    let (mut b, _, _) = EventLog::open(dir.path()).unwrap();
    assert_eq!(a.append(vec![ev(1)]).unwrap().1[0].seq, 1);
    let (foreign, mine) = b.append(vec![ev(2)]).unwrap();
    assert_eq!(foreign.len(), 1, "b reads a's record before writing");
    assert_eq!(foreign[0].seq, 1);
    assert_eq!(mine[0].seq, 2);
    let polled = a.poll().unwrap();
    assert_eq!(polled.iter().map(|r| r.seq).collect::<Vec<_>>(), [2]);
    assert_eq!(a.append(vec![ev(3)]).unwrap().1[0].seq, 3);
    assert!(b.poll().unwrap().len() == 1);
}

#[test]
fn poll_leaves_an_unterminated_tail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, _, _) = EventLog::open(dir.path()).unwrap();
    let (mut b, _, _) = EventLog::open(dir.path()).unwrap();
    a.append(vec![ev(1)]).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(a.path())
        .unwrap()
        .write_all(b"{\"seq\":2,")
        .unwrap();
    // Without the lock the tail may be a live writer's: not touched.
    assert_eq!(b.poll().unwrap().len(), 1);
    assert!(std::fs::read_to_string(a.path()).unwrap().ends_with(','));
    // Under the lock it is debris: cut, and its number skipped.
    let (foreign, mine) = b.append(vec![ev(3)]).unwrap();
    assert_eq!(foreign.last().unwrap().event, "runtime.recovered");
    assert_eq!(mine[0].seq, 4);
}

#[test]
fn fragment_seq_reads_only_a_complete_number() {
    assert_eq!(fragment_seq(br#"{"seq":12,"x"#), Some(12));
    assert_eq!(fragment_seq(br#"{"seq":12"#), None);
    assert_eq!(fragment_seq(br#"{"se"#), None);
}
