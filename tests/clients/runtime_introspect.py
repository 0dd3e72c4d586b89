#!/usr/bin/env python3
"""The skills, MCP-listing and session routes as a client written only
against docs/RUNTIME_API.md sees them, with the Python standard library.

Usage: runtime_introspect.py BASE_URL  (token in CODEWHALE_RUNTIME_TOKEN;
CW_SESSION: the id of a stored `exec` session whose thread the event log
does not know; CW_SECRET: a value that must never be in an answer).

Lists and toggles skills, lists MCP servers and tools (no server started),
lists, searches and reads sessions, resumes the stored session into a
thread (201, then 200), runs one turn on that thread, then deletes the
session. Prints one JSON summary line; exits non-zero on any violation.
"""
import json
import os

from cw_http import call, open_stream, read_until


def main():
    session = os.environ["CW_SESSION"]
    secret = os.environ["CW_SECRET"]

    # Skills: first name wins, the duplicate names its winner.
    st, sk = call("GET", "/v1/skills")
    assert st == 200, sk
    by = {}
    for s in sk["skills"]:
        by.setdefault(s["name"], []).append(s)
    assert sorted(by) == ["lint", "review"], sorted(by)
    lint = by["lint"]
    assert len(lint) == 2 and lint[0]["root"] == "local" and lint[0]["shadowed_by"] is None, lint
    assert lint[1]["root"] == "claude" and lint[1]["shadowed_by"] == lint[0]["path"], lint
    assert all(s["enabled"] for s in sk["skills"]), sk
    assert sk["roots"]["claude"]["count"] == 2 and sk["roots"]["opencode"]["present"] is False, sk
    assert len(sk["problems"]) == 1 and "broken" in sk["problems"][0]["path"], sk["problems"]

    st, t = call("PATCH", "/v1/skills/review", {"enabled": False})
    assert st == 200 and t["enabled"] is False and t["skills"][0]["enabled"] is False, t
    st, sk = call("GET", "/v1/skills")
    assert [s["enabled"] for s in sk["skills"] if s["name"] == "review"] == [False], sk
    st, e = call("PATCH", "/v1/skills/nosuch", {"enabled": False})
    assert st == 404 and e["error"]["code"] == "not_found", e
    st, e = call("PATCH", "/v1/skills/review", {"enabled": "no"})
    assert st == 400, e
    st, e = call("PATCH", "/v1/skills/review", {"enabled": True, "x": 1})
    assert st == 400 and "x" in e["error"]["message"], e
    st, e = call("PATCH", "/v1/skills/Bad_Name", {"enabled": True})
    assert st == 400 and "name" in e["error"]["message"], e

    # MCP: mcp.json's servers, env by name only; nothing started by a GET.
    st, m = call("GET", "/v1/apps/mcp/servers")
    assert st == 200 and m["present"] is True, m
    assert [s["name"] for s in m["servers"]] == ["docs", "off"], m
    docs = m["servers"][0]
    assert docs["env_keys"] == ["DOCS_TOKEN"] and docs["state"] == "not_started", docs
    assert m["servers"][1]["state"] == "disabled", m
    assert secret not in json.dumps(m), "an env value was answered"
    st, tl = call("GET", "/v1/apps/mcp/tools")
    assert st == 200 and tl == {"running": False, "tools": []}, tl
    st, tl = call("GET", "/v1/apps/mcp/tools?server=docs")
    assert st == 200 and tl["tools"] == [], tl
    st, e = call("GET", "/v1/apps/mcp/tools?server=nope")
    assert st == 404 and "nope" in e["error"]["message"], e
    st, e = call("GET", "/v1/apps/mcp/tools?srv=docs")
    assert st == 400, e

    # Sessions.
    st, ls = call("GET", "/v1/sessions")
    assert st == 200, ls
    ids = [s["id"] for s in ls["sessions"]]
    assert session in ids, (session, ids)
    one = [s for s in ls["sessions"] if s["id"] == session][0]
    assert one["preview"] == "say hello" and one["status"] == "completed", one
    assert one["live"] is False and one["turns"] >= 1, one
    st, ls = call("GET", "/v1/sessions?search=SAY%20HEL")
    assert [s["id"] for s in ls["sessions"]] == [session], ls
    st, ls = call("GET", "/v1/sessions?search=zzz-nothing")
    assert ls["sessions"] == [], ls
    st, e = call("GET", "/v1/sessions?limit=0")
    assert st == 400 and "limit" in e["error"]["message"], e
    st, d = call("GET", "/v1/sessions/" + session)
    assert st == 200 and d["session"]["id"] == session, d
    kinds = [r["type"] for r in d["records"]]
    assert kinds[0] == "thread_started" and "assistant_message" in kinds, kinds
    st, e = call("GET", "/v1/sessions/a.b")
    assert st == 400, e
    st, e = call("GET", "/v1/sessions/no-such-session")
    assert st == 404, e

    # Resume: the event log does not know it, so it becomes a thread.
    st, r = call("POST", "/v1/sessions/%s/resume-thread" % session)
    assert st == 201 and r["created"] is True and r["thread"]["id"] == session, r
    st, r2 = call("POST", "/v1/sessions/%s/resume-thread" % session)
    assert st == 200 and r2["created"] is False, r2
    st, th = call("GET", "/v1/threads/" + session)
    assert st == 200 and len(th["turns"]) == 1, th
    assert th["turns"][0]["session_id"] == session, th["turns"]
    texts = [(i["kind"], i["metadata"].get("text")) for i in th["items"]]
    assert ("user_message", "say hello") in texts, texts
    assert ("agent_message", "Hello from exec.") in texts, texts
    st, turn = call("POST", "/v1/threads/%s/turns" % session, {"prompt": "and again"})
    assert st == 202, turn
    with open_stream(session, since=0) as stream:
        evs = read_until(stream, "turn.completed")
    # The first turn's completion is replayed first; wait for the new one.
    done = [e for e in evs if e["event"] == "turn.completed"]
    if done[-1]["payload"]["turn"]["id"] != turn["turn"]["id"]:
        with open_stream(session, since=evs[-1]["seq"]) as stream:
            evs = read_until(stream, "turn.completed")
    last = evs[-1]["payload"]["turn"]
    assert last["status"] == "completed", last

    st, dl = call("DELETE", "/v1/sessions/" + session)
    assert st == 200 and dl == {"id": session, "deleted": True}, dl
    st, e = call("GET", "/v1/sessions/" + session)
    assert st == 404, e
    print(json.dumps({"ok": True, "skills": sorted(by), "resumed": session}))


if __name__ == "__main__":
    main()
