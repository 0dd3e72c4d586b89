#!/usr/bin/env python3
"""A runtime API client written only against docs/RUNTIME_API.md, with the
Python standard library (urllib, json): it shares no code with the server.

Usage: runtime_client.py BASE_URL   (token in CODEWHALE_RUNTIME_TOKEN)

The requests and the SSE reader are in cw_http.py beside it. Creates a
thread, starts a turn, follows the SSE stream (parsing the
`id:`/`event:`/`data:` lines itself), answers the approval the turn asks
for, and checks the envelope and the 404 of a repeated answer. Prints one
JSON summary line; exits non-zero on any contract violation.
"""
import json
import urllib.error
import urllib.request

from cw_http import BASE, call, open_stream, read_until


def events(thread, since, until_event):
    with open_stream(thread, since=since) as stream:
        return read_until(stream, until_event)


def main():
    code, unauth = 0, None
    try:
        urllib.request.urlopen(BASE + "/v1/threads", timeout=10)
    except urllib.error.HTTPError as e:
        code, unauth = e.code, json.loads(e.read())
    assert code == 401 and unauth["error"]["code"] == "unauthorized", unauth

    status, t = call("POST", "/v1/threads", {"title": "python"})
    assert status == 201, t
    thread = t["thread"]["id"]
    status, turn = call("POST", "/v1/threads/%s/turns" % thread, {"prompt": "go"})
    assert status == 202, turn

    seen = events(thread, 0, "approval.required")
    approval = seen[-1]["payload"]["approval_id"]
    status, body = call("POST", "/v1/approvals/" + approval, {"decision": "deny"})
    assert status == 200, body
    status, body = call("POST", "/v1/approvals/" + approval, {"decision": "deny"})
    assert status == 404 and body["error"]["code"] == "not_found", body

    allev = events(thread, 0, "turn.completed")
    prev = 0
    for e in allev:
        assert e["schema_version"] == 1 and e["thread_id"] == thread, e
        assert e["previous_seq"] == prev, (e, prev)
        prev = e["seq"]
    decided = [e for e in allev if e["event"] == "approval.decided"]
    assert len(decided) == 1 and decided[0]["payload"]["decision"] == "deny"
    status, bad = call("PATCH", "/v1/threads/" + thread, {"nope": 1})
    assert status == 400 and "nope" in bad["error"]["message"], bad
    print(json.dumps({"ok": True, "events": len(allev),
                      "last_status": allev[-1]["payload"]["turn"]["status"]}))


if __name__ == "__main__":
    main()
