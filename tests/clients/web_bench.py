"""benches/web.rs's browser half: `codewhale web`'s page in Debian's
Chromium (headless, DevTools protocol on a pipe; web_browser.py's Cdp and
Page, the Python standard library only).

Usage: web_bench.py CHROMIUM LINK ITEMS RUNS
Environment: CODEWHALE_RUNTIME_TOKEN (to read the thread's events as a
bearer client).

1. First paint to a usable composer with the ITEMS-item thread: RUNS+1
   loads of `/` (the first is a warm-up) with a script injected before the
   page's own (Page.addScriptToEvaluateOnNewDocument) that, every
   animation frame, checks whether the transcript holds ITEMS entries and
   the composer exists; the frame that first sees it is "usable"
   (performance.now(), from navigation start). Also the first contentful
   paint.
2. Runtime-to-DOM latency: a turn whose answer the scripted model streams
   at 200 deltas/s; a MutationObserver records (Date.now(), the answer's
   length) at each change; the thread's events are read back as a bearer
   client, and each item.delta's commit timestamp (`ts`, ms) is matched
   with the first DOM record that shows its text.
Prints one JSON line."""

import datetime
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request

from web_browser import Cdp, Page

PROBE = """
(() => {
  const want = %d;
  window.__cw = { usable: null };
  const tick = () => {
    const t = document.getElementById('transcript');
    if (t && t.childElementCount >= want && document.getElementById('prompt')) {
      window.__cw.usable = performance.now();
      return;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

OBSERVE = """
(() => {
  window.__lat = [];
  const t = document.getElementById('transcript');
  const agents = () => t.querySelectorAll('.msg.agent');
  const before = agents().length;
  new MutationObserver(() => {
    const a = agents();
    if (a.length > before) window.__lat.push([Date.now(), a[a.length - 1].textContent.length]);
  }).observe(t, { childList: true, subtree: true, characterData: true });
  return before;
})()
"""


OBSERVE_ITEMS = """
(() => {
  window.__items = { appear: {}, done: {} };
  const t = document.getElementById('transcript');
  new MutationObserver((ms) => {
    const now = Date.now();
    for (const m of ms) {
      for (const n of m.addedNodes) {
        if (n.dataset && n.dataset.item && !(n.dataset.item in window.__items.appear)) {
          window.__items.appear[n.dataset.item] = now;
        }
      }
      const meta = m.target.classList && m.target.classList.contains('meta') ? m.target : null;
      if (meta && meta.textContent !== 'running…') {
        const id = meta.parentElement.dataset.item;
        if (id && !(id in window.__items.done)) window.__items.done[id] = now;
      }
    }
  }).observe(t, { childList: true, subtree: true, characterData: true });
  return true;
})()
"""


# When each envelope reaches the page's handler, and what the handler
# costs (the page's script calls onEnvelope by its global name).
HOOK = """
(() => {
  window.__recv = {}; window.__cost = [];
  const orig = onEnvelope;
  onEnvelope = function (g, d) {
    const t0 = performance.now();
    try { window.__recv[JSON.parse(d).seq] = Date.now(); } catch (_) {}
    orig(g, d);
    window.__cost.push(performance.now() - t0);
  };
  return true;
})()
"""


def ms(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000.0


def events(origin, thread, since, token, turn_end, arrivals=None):
    """The thread's envelopes after `since` until the next turn.completed;
    `arrivals` (a dict) gets each seq's arrival time at this client."""
    req = urllib.request.Request(
        "%s/v1/threads/%s/events?since_seq=%d" % (origin, thread, since),
        headers={"Authorization": "Bearer " + token, "Accept": "text/event-stream"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    out = []
    with opener.open(req, timeout=30) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                env = json.loads(line[5:].strip())
                if arrivals is not None:
                    arrivals[env["seq"]] = time.time() * 1000.0
                out.append(env)
                if env["event"] == "turn.completed":
                    return out
    return out


def main():
    chromium, link, items, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    token = os.environ["CODEWHALE_RUNTIME_TOKEN"]
    origin = link.split("/bootstrap/")[0]
    cdp = Cdp(chromium, tempfile.mkdtemp(), ["--window-size=1280,900"])
    try:
        page = Page(cdp)
        page.goto(link)
        page.wait("!!document.getElementById('composer')", "the app")
        page.call("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE % items})
        usable, fcp, snap = [], [], []
        for i in range(runs + 1):
            page.call("Page.navigate", {"url": origin + "/"})
            page.wait("window.__cw && window.__cw.usable !== null", "a usable composer")
            u = page.eval("window.__cw.usable")
            p = page.eval("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null")
            # The snapshot request's own time (server + transfer), so the
            # page's share is visible.
            q = page.eval("(performance.getEntriesByType('resource').find(e => "
                          "/\\/v1\\/threads\\/thr_[^/?]+$/.test(e.name)) || {}).duration || null")
            if i > 0:
                usable.append(u)
                fcp.append(p)
                snap.append(q)
        thread = page.eval("state.current")
        latest = page.eval("state.lastSeq")

        before = page.eval(OBSERVE)
        page.eval("document.getElementById('prompt').value = 'stream';"
                  "document.getElementById('send').click(); true")
        page.wait("document.getElementById('send').textContent === 'Steer'", "the turn", )
        page.wait("document.getElementById('send').textContent === 'Send'", "the turn's end")
        dom = page.eval("window.__lat")
        envs = events(origin, thread, latest, token, None)
        deltas = [e for e in envs if e["event"] == "item.delta"
                  and e["payload"].get("kind") == "agent_message"]
        lat, cum = [], 0
        for e in deltas:
            cum += len(e["payload"]["delta"])
            seen = next((t for (t, n) in dom if n >= cum), None)
            assert seen is not None, ("a delta never reached the DOM", cum, dom[-3:])
            lat.append(seen - ms(e["timestamp"]))
        span = (ms(deltas[-1]["timestamp"]) - ms(deltas[0]["timestamp"])) / 1000.0

        # A burst of tool items (many read_file calls in one response):
        # item.started and item.completed envelopes to their DOM change.
        latest2 = page.eval("state.lastSeq")
        page.eval(OBSERVE_ITEMS)
        page.eval(HOOK)
        # A bearer client reading the same stream meanwhile: how much of
        # the latency is before the page (runtime to socket).
        arrivals = {}
        reader = threading.Thread(target=events,
                                  args=(origin, thread, latest2, token, None, arrivals))
        reader.start()
        time.sleep(0.3)
        page.eval("document.getElementById('prompt').value = 'read them all';"
                  "document.getElementById('send').click(); true")
        page.wait("document.getElementById('send').textContent === 'Steer'", "the tool turn")
        page.wait("document.getElementById('send').textContent === 'Send'", "the tool turn's end")
        seen = page.eval("window.__items")
        recv = page.eval("window.__recv")
        cost = page.eval("window.__cost")
        recv_lat = []
        reader.join(30)
        envs2 = events(origin, thread, latest2, token, None)
        item_lat, item_ts, sock_lat = [], [], []
        for e in envs2:
            iid = e.get("item_id")
            kind = (e["payload"].get("item") or {}).get("kind")
            if kind not in ("tool_call", "command_execution", "file_change"):
                continue
            at = None
            if e["event"] == "item.started":
                at = seen["appear"].get(iid)
            elif e["event"] in ("item.completed", "item.failed"):
                at = seen["done"].get(iid)
            if at is None:
                continue
            item_lat.append(at - ms(e["timestamp"]))
            if str(e["seq"]) in recv:
                recv_lat.append(recv[str(e["seq"])] - ms(e["timestamp"]))
            if e["seq"] in arrivals:
                sock_lat.append(arrivals[e["seq"]] - ms(e["timestamp"]))
            item_ts.append(ms(e["timestamp"]))
        item_span = (max(item_ts) - min(item_ts)) / 1000.0 if item_ts else 0
        all_span = (ms(envs[-1]["timestamp"]) - ms(envs[0]["timestamp"])) / 1000.0
        print(json.dumps({
            "ok": True, "items": items, "usable_ms": usable, "fcp_ms": fcp, "snapshot_ms": snap,
            "agent_messages_before": before, "deltas": len(deltas),
            "delta_envelopes_per_s": len(deltas) / span if span > 0 else None,
            "envelopes": len(envs), "envelopes_per_s": len(envs) / all_span if all_span > 0 else None,
            "latency_ms": lat, "answer_chars": cum,
            "item_latency_ms": item_lat, "item_socket_latency_ms": sock_lat,
            "item_handler_in_ms": recv_lat, "handler_cost_ms": cost,
            "item_events_per_s": len(item_lat) / item_span if item_span > 0 else None,
        }))
    finally:
        cdp.close()


if __name__ == "__main__":
    main()
