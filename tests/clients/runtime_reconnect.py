#!/usr/bin/env python3
"""An SSE reconnect in the middle of a turn, written only against
docs/RUNTIME_API.md with the Python standard library (urllib, json).

Usage: runtime_reconnect.py BASE_URL   (token in CODEWHALE_RUNTIME_TOKEN)

1. start a turn whose first tool call waits for an approval;
2. connection A follows the thread's events until approval.required, then
   drops;
3. the thread snapshot (GET /v1/threads/{id}) shows the pending approval at
   or before its latest_seq;
4. connection B reconnects with Last-Event-ID = A's last id; only then is
   the approval answered; B follows until turn.completed;
5. A + B must be exactly the full replay (since_seq=0): no gap, no
   duplicate, and B's first previous_seq is A's last seq.

The requests and the SSE reader are in cw_http.py beside it. Prints one
JSON line; exits non-zero on any violation.
"""
import json

from cw_http import call, open_stream, read_until


def main():
    status, t = call("POST", "/v1/threads", {"title": "reconnect"})
    assert status == 201, t
    thread = t["thread"]["id"]
    status, turn = call("POST", "/v1/threads/%s/turns" % thread, {"prompt": "go"})
    assert status == 202, turn

    a_stream = open_stream(thread, since=0)
    a = read_until(a_stream, "approval.required")
    a_stream.close()  # the client goes away mid-turn
    approval = a[-1]["payload"]["approval_id"]

    status, snap = call("GET", "/v1/threads/" + thread)
    assert status == 200, snap
    pending = [p["id"] for p in snap["pending_approvals"]]
    assert pending == [approval], snap["pending_approvals"]
    assert snap["pending_approvals"][0]["seq"] <= snap["latest_seq"], snap
    assert snap["latest_seq"] >= a[-1]["seq"], snap

    b_stream = open_stream(thread, since=0, last_event_id=a[-1]["seq"])
    status, body = call("POST", "/v1/approvals/" + approval, {"decision": "allow"})
    assert status == 200, body
    b = read_until(b_stream, "turn.completed")
    b_stream.close()

    full_stream = open_stream(thread, since=0)
    full = read_until(full_stream, "turn.completed")
    full_stream.close()

    got = [e["seq"] for e in a] + [e["seq"] for e in b]
    want = [e["seq"] for e in full]
    assert len(got) == len(set(got)), ("duplicates", got)
    assert got == want, ("gap or reorder", got, want)
    assert b[0]["previous_seq"] == a[-1]["seq"], (b[0], a[-1])
    prev = a[-1]["seq"]
    for e in b:
        assert e["previous_seq"] == prev, (e, prev)
        prev = e["seq"]
    assert b[-1]["payload"]["turn"]["status"] == "completed", b[-1]
    print(json.dumps({"ok": True, "before_drop": len(a),
                      "after_reconnect": len(b), "events": len(full)}))


if __name__ == "__main__":
    main()
