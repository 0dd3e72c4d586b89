"""The HTTP side shared by the runtime's Python clients (runtime_client.py,
runtime_reconnect.py): JSON requests with the bearer token and an SSE
reader, written only against docs/RUNTIME_API.md with the Python standard
library (urllib, json). It shares no code with the server.

The base URL is the script's first argument; the token is read from
CODEWHALE_RUNTIME_TOKEN.
"""
import json
import os
import sys
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
TOKEN = os.environ["CODEWHALE_RUNTIME_TOKEN"]


def call(method, path, body=None):
    """`method path` with the token (and a JSON body): (status, JSON)."""
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


def open_stream(thread, since=None, last_event_id=None):
    """The thread's SSE event stream (`since_seq` and `Last-Event-ID` as
    given)."""
    url = "%s/v1/threads/%s/events" % (BASE, thread)
    if since is not None:
        url += "?since_seq=%d" % since
    req = urllib.request.Request(url)
    req.add_header("Authorization", "Bearer " + TOKEN)
    req.add_header("Accept", "text/event-stream")
    if last_event_id is not None:
        req.add_header("Last-Event-ID", str(last_event_id))
    return urllib.request.urlopen(req, timeout=30)


def read_until(stream, until_event):
    """Envelopes of SSE messages (id/event/data lines, a blank line ends
    one; keep-alive comments skipped) up to and including the named event.
    Each message's `id:` is its seq and its `event:` its name and kind."""
    out = []
    ev = {}
    for raw in stream:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            continue
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
