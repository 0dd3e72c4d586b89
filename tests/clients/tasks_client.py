#!/usr/bin/env python3
"""A tasks and automations client written only against docs/RUNTIME_API.md
("Tasks", "Automations"), with the Python standard library (urllib, json):
it shares no code with the server.

Usage: tasks_client.py BASE_URL PHASE [ARG...]  (token in
CODEWHALE_RUNTIME_TOKEN)

The test that runs it starts, kills and restarts the server between
phases; each phase checks what the contract says at that point and prints
one JSON line (ids the next phase needs). Exits non-zero on any violation.
"""
import json
import sys
import time

from cw_http import call

WAIT = 30


def wait_task(task_id, until):
    """Poll GET /v1/tasks/{id} until `until(task)` (30 s at most)."""
    deadline = time.time() + WAIT
    while True:
        status, body = call("GET", "/v1/tasks/" + task_id)
        assert status == 200, body
        t = body["task"]
        if until(t):
            return t
        assert time.time() < deadline, ("task never got there", t)
        time.sleep(0.1)


def done(t):
    return t["status"] in ("completed", "failed", "canceled")


def create(prompt, **extra):
    body = {"prompt": prompt}
    body.update(extra)
    status, b = call("POST", "/v1/tasks", body)
    assert status == 201, b
    t = b["task"]
    assert t["status"] in ("queued", "running"), t
    for key in ("id", "prompt", "status", "thread_id", "created_at",
                "started_at", "finished_at", "summary", "error"):
        assert key in t, (key, t)
    return t


def task_runs():
    """A task runs to completed with its thread; bad bodies name the
    field; cancel of a finished task answers 200 and changes nothing."""
    t = create("say hello")
    t = wait_task(t["id"], done)
    assert t["status"] == "completed", t
    assert t["summary"] == "Hello from the task.", t
    assert t["started_at"] and t["finished_at"] and t["error"] is None, t
    status, th = call("GET", "/v1/threads/" + t["thread_id"])
    assert status == 200, th
    assert th["thread"]["title"] == "task " + t["id"], th["thread"]
    assert [x["status"] for x in th["turns"]] == ["completed"], th["turns"]
    assert th["thread"]["auto_approve"] is False, th["thread"]
    # The thread says which task it runs; a thread of its own does not.
    assert th["thread"]["task_id"] == t["id"], th["thread"]
    status, plain = call("POST", "/v1/threads", {})
    assert status == 201 and "task_id" not in plain["thread"], plain
    status, lst = call("GET", "/v1/tasks")
    assert status == 200 and [x["id"] for x in lst["tasks"]] == [t["id"]], lst
    for _ in range(2):
        status, c = call("POST", "/v1/tasks/%s/cancel" % t["id"])
        assert status == 200 and c["task"]["status"] == "completed", c
    status, e = call("POST", "/v1/tasks", {"prompt": "x", "bogus": 1})
    assert status == 400 and "bogus" in e["error"]["message"], e
    status, e = call("POST", "/v1/tasks", {"prompt": "  "})
    assert status == 400 and e["error"]["message"].startswith("prompt:"), e
    status, e = call("GET", "/v1/tasks/tsk_nope")
    assert status == 404 and e["error"]["code"] == "not_found", e
    status, e = call("POST", "/v1/tasks/tsk_nope/cancel")
    assert status == 404, e
    return {"task": t["id"], "thread": t["thread_id"]}


def start_two():
    """With one worker and a model that hangs: A running, B queued."""
    a = create("hang here")
    a = wait_task(a["id"], lambda t: t["status"] == "running" and t["turn_id"])
    b = create("then this")
    status, got = call("GET", "/v1/tasks/" + b["id"])
    assert got["task"]["status"] == "queued", got
    return {"a": a["id"], "b": b["id"]}


def after_restart(a, b):
    """A was running when the process was killed: failed, interrupted by
    process restart. B was queued: it runs now."""
    ta = wait_task(a, done)
    assert ta["status"] == "failed", ta
    assert ta["error"] == "interrupted by process restart", ta
    tb = wait_task(b, done)
    assert tb["status"] == "completed", tb
    status, lst = call("GET", "/v1/tasks")
    ids = sorted(x["id"] for x in lst["tasks"])
    assert ids == sorted([a, b]), ids
    return {"a": ta["status"], "b": tb["status"]}


def cancel():
    """Cancel is idempotent: a queued task, then a running one (its turn
    is interrupted), each canceled twice."""
    ids = start_two()
    for _ in range(2):
        status, c = call("POST", "/v1/tasks/%s/cancel" % ids["b"])
        assert status == 200 and c["task"]["status"] == "canceled", c
    for _ in range(2):
        status, c = call("POST", "/v1/tasks/%s/cancel" % ids["a"])
        assert status == 200 and c["task"]["status"] == "canceled", c
    ta = wait_task(ids["a"], lambda t: t["finished_at"])
    assert ta["status"] == "canceled", ta
    status, th = call("GET", "/v1/threads/" + ta["thread_id"])
    assert [x["status"] for x in th["turns"]] == ["interrupted"], th["turns"]
    status, c = call("POST", "/v1/tasks/%s/cancel" % ids["a"])
    assert status == 200 and c["task"]["status"] == "canceled", c
    tb = wait_task(ids["b"], done)
    assert tb["status"] == "canceled" and tb["thread_id"] is None, tb
    return ids


def automation(body):
    status, b = call("POST", "/v1/automations", body)
    assert status == 201, b
    a = b["automation"]
    assert "next_run_at" in a, a
    return a


def runs(aid, limit=None):
    path = "/v1/automations/%s/runs" % aid
    if limit is not None:
        path += "?limit=%d" % limit
    status, b = call("GET", path)
    assert status == 200, b
    return b["runs"]


def wait_runs(aid, until):
    deadline = time.time() + WAIT
    while True:
        r = runs(aid, 500)
        if until(r):
            return r
        assert time.time() < deadline, ("runs never got there", r)
        time.sleep(0.1)


def create_automations(once_at):
    """A ONCE slot in the future and an hourly automation; bad schedules
    and zones are 400 naming the field."""
    once = automation({"name": "once", "prompt": "once please",
                       "schedule": "RRULE:FREQ=ONCE;AT=" + once_at,
                       "timezone": "UTC"})
    assert once["next_run_at"] is not None, once
    hourly = automation({"name": "hourly", "prompt": "hourly please",
                         "schedule": "RRULE:FREQ=HOURLY;BYMINUTE=0",
                         "timezone": "America/New_York"})
    assert hourly["missed_run_policy"] == "run_once", hourly
    assert hourly["overlap"] == "skip_if_running", hourly
    assert hourly["auto_approve"] is False and hourly["paused"] is False
    for bad, field, text in [
        ({"schedule": "RRULE:FREQ=WEEKLY;BYHOUR=9"}, "schedule", "needs BYDAY"),
        ({"schedule": "CRON:0 9 * *"}, "schedule", "5 fields"),
        ({"schedule": "every day"}, "schedule", "RRULE:"),
        ({"schedule": "CRON:0 9 * * *", "timezone": "Mars/Olympus"}, "timezone", "IANA"),
    ]:
        body = {"name": "bad", "prompt": "p"}
        body.update(bad)
        status, e = call("POST", "/v1/automations", body)
        msg = e["error"]["message"]
        assert status == 400 and msg.startswith(field + ":") and text in msg, e
    status, lst = call("GET", "/v1/automations")
    assert len(lst["automations"]) == 2, lst
    return {"once": once["id"], "hourly": hourly["id"]}


def after_three_hours(once, hourly):
    """Restarted 3 h 30 min later: the ONCE slot ran once; the hourly one
    ran once for the newest missed slot, the older ones skipped_missed."""
    r = wait_runs(hourly, lambda r: any(x["status"] == "completed" for x in r))
    statuses = [x["status"] for x in r]
    assert statuses.count("completed") == 1, r
    assert statuses[0] == "completed", r  # the newest slot is the one run
    assert statuses[1:] == ["skipped_missed"] * (len(r) - 1), r
    assert len(r) == 3, r
    for x in r:
        for key in ("id", "slot", "task_id", "status", "started_at", "finished_at"):
            assert key in x, (key, x)
    ro = wait_runs(once, lambda r: r and r[0]["status"] == "completed")
    assert len(ro) == 1, ro
    status, a = call("GET", "/v1/automations/" + once)
    assert a["automation"]["next_run_at"] is None, a
    status, h = call("GET", "/v1/automations/" + hourly)
    assert h["automation"]["next_run_at"] is not None, h
    assert len(runs(hourly, 1)) == 1
    status, e = call("GET", "/v1/automations/%s/runs?limit=0" % hourly)
    assert status == 400 and e["error"]["message"].startswith("limit:"), e
    return {"hourly_runs": statuses, "once_runs": len(ro)}


def still_once(once, hourly):
    """Another restart later: nothing ran twice."""
    ro = runs(once, 500)
    assert len(ro) == 1 and ro[0]["status"] == "completed", ro
    status, lst = call("GET", "/v1/tasks")
    by_run = {}
    for t in lst["tasks"]:
        if t.get("run_id"):
            by_run.setdefault(t["run_id"], []).append(t["id"])
    assert all(len(v) == 1 for v in by_run.values()), by_run
    return {"tasks": len(lst["tasks"])}


def pause_run_resume(aid):
    """Pause (next_run_at null), run while paused (202), a second manual
    run while the first is queued or running is 409, resume."""
    status, p = call("POST", "/v1/automations/%s/pause" % aid)
    assert status == 200 and p["automation"]["paused"] is True, p
    assert p["automation"]["next_run_at"] is None, p
    status, r = call("POST", "/v1/automations/%s/run" % aid)
    assert status == 202 and r["run"]["task_id"] == r["task"]["id"], r
    status, e = call("POST", "/v1/automations/%s/run" % aid)
    assert status == 409 and e["error"]["code"] == "automation_running", e
    status, p = call("POST", "/v1/automations/%s/resume" % aid)
    assert status == 200 and p["automation"]["paused"] is False, p
    assert p["automation"]["next_run_at"] is not None, p
    status, pa = call("PATCH", "/v1/automations/" + aid, {"name": "renamed"})
    assert status == 200 and pa["automation"]["name"] == "renamed", pa
    status, pa = call("PATCH", "/v1/automations/" + aid, {"schedule": "CRON:61 * * * *"})
    assert status == 400 and pa["error"]["message"].startswith("schedule:"), pa
    status, d = call("DELETE", "/v1/automations/" + aid)
    assert status == 200 and d["deleted"] is True, d
    status, e = call("GET", "/v1/automations/" + aid)
    assert status == 404, e
    return {"manual_run": r["run"]["id"]}


def create_one(body):
    """Create the automation of a JSON body; its id and next_run_at."""
    a = automation(json.loads(body))
    return {"id": a["id"], "next_run_at": a["next_run_at"]}


def ran_once(aid, next_run_at):
    """Exactly one run of `aid`, completed, with exactly one task; the
    automation's next_run_at is as given ("null" for none)."""
    r = wait_runs(aid, lambda r: r and r[0]["status"] in ("completed", "failed"))
    assert len(r) == 1 and r[0]["status"] == "completed", r
    status, lst = call("GET", "/v1/tasks")
    mine = [t for t in lst["tasks"] if t.get("automation_id") == aid]
    assert len(mine) == 1 and mine[0]["id"] == r[0]["task_id"], mine
    status, a = call("GET", "/v1/automations/" + aid)
    want = None if next_run_at == "null" else next_run_at
    assert a["automation"]["next_run_at"] == want, a
    return {"run": r[0]["id"], "slot": r[0]["slot"]}


def no_runs(aid, next_run_at):
    """No run of `aid` at all, and next_run_at as given."""
    assert runs(aid, 500) == [], runs(aid, 500)
    status, a = call("GET", "/v1/automations/" + aid)
    assert a["automation"]["next_run_at"] == next_run_at, a
    return {}


def main():
    phase, args = sys.argv[2], sys.argv[3:]
    out = globals()[phase](*args)
    print(json.dumps({"ok": True, "phase": phase, "out": out}))


if __name__ == "__main__":
    main()
