#!/usr/bin/env python3
"""A runtime API client written only against docs/RUNTIME_API.md, with the
Python standard library (urllib, json): it shares no code with the server.

Usage: runtime_client.py BASE_URL   (token in CODEWHALE_RUNTIME_TOKEN)

Creates a thread, starts a turn, follows the SSE stream (parsing the
`id:`/`event:`/`data:` lines itself), answers the approval the turn asks
for, and checks the envelope and the 404 of a repeated answer. Prints one
JSON summary line; exits non-zero on any contract violation.
"""
import json
import os
import sys
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
TOKEN = os.environ["CODEWHALE_RUNTIME_TOKEN"]


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + TOKEN)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def events(thread, since, until_event):
    req = urllib.request.Request(
        "%s/v1/threads/%s/events?since_seq=%d" % (BASE, thread, since))
    req.add_header("Authorization", "Bearer " + TOKEN)
    req.add_header("Accept", "text/event-stream")
    out = []
    with urllib.request.urlopen(req, timeout=30) as r:
        ev = {}
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith(":"):
                continue  # keep-alive comment
            if line == "":
                if "data" in ev:
                    env = json.loads(ev["data"])
                    assert ev["id"] == str(env["seq"]), ev
                    assert ev["event"] == env["event"] == env["kind"], ev
                    out.append(env)
                    if env["event"] == until_event:
                        return out
                ev = {}
                continue
            key, _, value = line.partition(":")
            ev[key] = value[1:] if value.startswith(" ") else value
    raise AssertionError("stream ended before " + until_event)


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
