#!/usr/bin/env python3
"""A JSON-RPC 2.0 client of `codewhale app-server --stdio`, written only
against docs/RUNTIME_API.md (section "stdio") and the JSON-RPC 2.0
specification, with the Python standard library (subprocess, json,
threading, queue): it shares no code with the server.

Usage: runtime_stdio_client.py CODEWHALE_BIN WORKSPACE

The server is started as `CODEWHALE_BIN app-server --stdio -C WORKSPACE`
with this process's environment. The model behind it must answer, in
order: a `write_file` call outside the workspace (which asks for an
approval), a call of the client tool `open_in_editor`, then a text reply.

Both tool calls are gated (the thread is not auto-approved): the client
denies the first and allows the second. The client sends a line that is not JSON (-32700 with id null), an unknown
method (-32601 with the request's id) and an unknown-method notification
(no reply at all), and checks the server still answers afterwards. It then
creates a thread with the client tool, subscribes, starts a turn, denies
the write, allows the client tool, returns the tool's result, follows the `event` notifications
to `turn.completed`, checks the envelope chain and that repeated answers
are refused (-32004), and shuts the server down (exit 0). Every stdout
line must be one JSON object. Prints one JSON summary line; exits
non-zero on any contract violation.
"""
import json
import queue
import subprocess
import sys
import threading
import time

BIN, WS = sys.argv[1], sys.argv[2]
TOOL_OUTPUT = "editor-output-stdio-5810"
WAIT = 30.0


class Rpc:
    def __init__(self):
        self.proc = subprocess.Popen(
            [BIN, "app-server", "--stdio", "-C", WS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.lines = queue.Queue()
        self.events = []
        self.next_id = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)  # EOF

    def send_line(self, text):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, deadline):
        try:
            raw = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("no message in time; events so far: %r"
                                 % [e["event"] for e in self.events])
        if raw is None:
            raise AssertionError("server closed stdout (exit %r)"
                                 % self.proc.poll())
        msg = json.loads(raw)  # stdout carries JSON only
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", msg
        return msg

    def message(self, want):
        """The next message that is not an event notification (events are
        kept); checks it answers `want` (an id, or None)."""
        deadline = time.monotonic() + WAIT
        while True:
            msg = self.read(deadline)
            if msg.get("method") == "event":
                assert "id" not in msg, msg  # a notification
                self.events.append(msg["params"])
                continue
            assert msg.get("id") == want, (want, msg)
            assert ("result" in msg) != ("error" in msg), msg
            return msg

    def request(self, method, params=None):
        self.next_id += 1
        req = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            req["params"] = params
        self.send_line(json.dumps(req))
        return self.message(self.next_id)

    def result(self, method, params=None):
        msg = self.request(method, params)
        assert "result" in msg, (method, msg)
        return msg["result"]

    def error_code(self, method, params=None):
        msg = self.request(method, params)
        assert "error" in msg, (method, msg)
        return msg["error"]["code"]

    def wait_event(self, name, nth=1):
        """The `nth` event called `name` (reading notifications until it
        has come)."""
        deadline = time.monotonic() + WAIT
        while True:
            seen = [e for e in self.events if e["event"] == name]
            if len(seen) >= nth:
                return seen[nth - 1]
            msg = self.read(deadline)
            assert msg.get("method") == "event", ("unasked reply", msg)
            self.events.append(msg["params"])


def probes(rpc):
    """Bad input is answered and the server keeps serving."""
    assert rpc.result("healthz")["status"] == "ok"
    rpc.send_line("{this is not json")
    parse = rpc.message(None)
    assert parse["error"]["code"] == -32700, parse
    assert rpc.error_code("no/such/method") == -32601
    # A notification is never answered, not even with an error: the next
    # reply on stdout must be the healthz that follows it.
    rpc.send_line(json.dumps({"jsonrpc": "2.0", "method": "no/such/either"}))
    assert rpc.result("healthz")["status"] == "ok"
    methods = rpc.result("capabilities")["methods"]
    for m in ["thread/start", "thread/subscribe", "turn/start",
              "approval/decide", "tool_call/result", "shutdown"]:
        assert m in methods, (m, methods)


def turn(rpc):
    tool = {"name": "open_in_editor",
            "description": "Open a file in the user's editor",
            "parameters": {"type": "object",
                           "properties": {"file": {"type": "string"}}}}
    thread = rpc.result("thread/start",
                        {"title": "stdio", "client_tools": [tool]})["thread"]
    assert thread["auto_approve"] is False, thread
    tid = thread["id"]
    sub = rpc.result("thread/subscribe", {"thread_id": tid, "since_seq": 0})
    assert sub["subscribed"] == tid, sub
    started = rpc.result("turn/start", {"thread_id": tid, "prompt": "go"})
    turn_id = started["turn"]["id"]

    asked = rpc.wait_event("approval.required")
    assert asked["payload"]["tool"] == "write_file", asked
    approval = asked["payload"]["approval_id"]
    decided = rpc.result("approval/decide",
                         {"approval_id": approval, "decision": "deny"})
    assert decided == {"approval_id": approval, "decision": "deny"}, decided
    assert rpc.error_code("approval/decide", {
        "approval_id": approval, "decision": "deny"}) == -32004

    # The client tool is gated like any tool: allowed this time (the
    # positive control of the denial above).
    asked2 = rpc.wait_event("approval.required", 2)
    assert asked2["payload"]["tool"] == "open_in_editor", asked2
    rpc.result("approval/decide", {"approval_id": asked2["payload"]["approval_id"],
                                   "decision": "allow"})

    wanted = rpc.wait_event("tool_call.requested")
    assert wanted["payload"]["tool"] == "open_in_editor", wanted
    assert wanted["payload"]["arguments"] == {"file": "README.md"}, wanted
    call = wanted["payload"]["call_id"]
    answer = {"thread_id": tid, "turn_id": turn_id, "call_id": call,
              "output": TOOL_OUTPUT, "success": True}
    accepted = rpc.result("tool_call/result", answer)
    assert accepted["result_accepted"] is True, accepted
    assert rpc.error_code("tool_call/result", answer) == -32004

    done = rpc.wait_event("turn.completed")
    assert done["payload"]["turn"]["status"] == "completed", done
    evs = rpc.events[:rpc.events.index(done) + 1]
    prev = 0
    for e in evs:
        assert e["schema_version"] == 1 and e["thread_id"] == tid, e
        assert e["kind"] == e["event"], e
        assert e["previous_seq"] == prev, (e, prev)
        prev = e["seq"]
    names = [e["event"] for e in evs]
    assert names.count("approval.decided") == 2, names
    assert names.count("tool_call.resolved") == 1, names
    assert names.index("approval.decided") < names.index("tool_call.requested")
    decisions = [e["payload"]["decision"] for e in evs
                 if e["event"] == "approval.decided"]
    assert decisions == ["deny", "allow"], decisions
    # The result's text stays out of the events (it goes to the model).
    assert TOOL_OUTPUT not in json.dumps(evs)
    read = rpc.result("thread/read", {"thread_id": tid})
    assert read["latest_seq"] >= done["seq"], read
    # The same snapshot as GET /v1/threads/{id}: the one API answers both.
    assert read["thread"]["id"] == tid and read["turns"][0]["id"] == turn_id, read
    assert read["pending_approvals"] == [], read
    assert any(i["kind"] == "user_message" for i in read["items"]), read
    assert read["auto_review"] == {"paused": False}, read
    # Selecting Auto-Review again on a thread that is not paused: a no-op.
    again = rpc.result("thread/auto_review_resume", {"thread_id": tid})
    assert again["resumed"] is False and again["auto_review"] == {"paused": False}, again
    assert rpc.error_code("thread/auto_review_resume", {"thread_id": "nope"}) == -32004
    # The routes that were HTTP-only are methods too, with the same checks.
    summary = rpc.result("thread/summary", {"limit": 5})
    assert [i["id"] for i in summary["items"]] == [tid], summary
    assert summary["items"][0]["latest_turn_status"] == "completed", summary
    assert rpc.error_code("thread/list", {"limit": 0}) == -32602
    assert rpc.error_code("thread/list", {"limt": 5}) == -32602
    receipt = rpc.result("turn/receipt", {"thread_id": tid, "turn_id": turn_id})
    assert receipt["source"]["session_id"], receipt
    assert rpc.error_code("turn/receipt",
                          {"thread_id": tid, "turn_id": "turn_nope"}) == -32004
    snaps = rpc.result("app/snapshots", {"limit": 5})
    assert isinstance(snaps, list), snaps
    assert rpc.error_code("app/snapshots", {"limit": 101}) == -32602
    status = rpc.result("app/workspace_status")
    assert "dirty" in status and "workspace" in status, status
    usage = rpc.result("app/usage", {"group_by": "model"})
    assert usage["group_by"] == "model", usage
    assert rpc.error_code("app/usage", {"group_by": "planet"}) == -32602
    return tid, len(evs), names


def main():
    rpc = Rpc()
    try:
        probes(rpc)
        tid, count, names = turn(rpc)
        # Still alive after the turn: a bad line is answered, then shutdown.
        rpc.send_line("][")
        assert rpc.message(None)["error"]["code"] == -32700
        assert rpc.result("shutdown") == {"shutting_down": True}
        rpc.proc.stdin.close()
        code = rpc.proc.wait(timeout=WAIT)
        assert code == 0, code
        # Whatever follows the shutdown reply is JSON and a notification.
        while True:
            raw = rpc.lines.get(timeout=WAIT)
            if raw is None:
                break
            assert json.loads(raw).get("method") == "event", raw
    finally:
        if rpc.proc.poll() is None:
            rpc.proc.kill()
            rpc.proc.wait()
    print(json.dumps({"ok": True, "thread_id": tid, "events": count,
                      "exit": code, "first": names[0], "last": names[-1]}))


if __name__ == "__main__":
    main()
