"""Three seconds offline in the middle of a streaming answer, in Debian's
Chromium (headless, DevTools protocol on a pipe; the Cdp and Page classes
of web_browser.py, the Python standard library only).

Usage: web_offline.py CHROMIUM URL web|mobile EXPECTED
  web:    URL is `codewhale web`'s one-time link.
  mobile: URL is `app-server --mobile`'s origin; the token
          (CODEWHALE_RUNTIME_TOKEN) is typed into /mobile.

A turn starts; once the answer has begun to stream the browser goes
offline (Network.emulateNetworkConditions offline: true) for 3 s while the
scripted model keeps streaming, then online again. After the turn ends the
answer must read EXPECTED exactly once (no duplicated text) and every item
id in the DOM must be unique. Prints one JSON line (what the page showed
while offline, and the text length then)."""

import json
import os
import sys
import tempfile
import time

from web_browser import Cdp, Page

AGENT = "[...document.querySelectorAll('.msg.agent')]"


def network(page, offline):
    page.call("Network.emulateNetworkConditions",
              {"offline": offline, "latency": 0, "downloadThroughput": -1,
               "uploadThroughput": -1})


def main():
    chromium, url, mode, expected = sys.argv[1:5]
    profile = tempfile.mkdtemp()
    cdp = Cdp(chromium, profile, [])
    try:
        page = Page(cdp)
        if mode == "mobile":
            page.goto(url + "/mobile")
            page.wait("!!document.getElementById('token')")
            page.eval("document.getElementById('token').focus(); true")
            page.call("Input.insertText", {"text": os.environ["CODEWHALE_RUNTIME_TOKEN"]})
            page.eval("document.getElementById('connect').click(); true")
            page.wait("!document.getElementById('app').hidden", "the unlocked app")
            page.eval("document.getElementById('new-thread').click(); true")
        else:
            page.goto(url)
            page.wait("!!document.getElementById('composer')", "the app")
        page.eval("document.getElementById('prompt').value = 'stream something long';"
                  "document.getElementById('send').click(); true")
        page.wait("document.getElementById('conn').textContent === 'live' && "
                  + AGENT + ".some(n => n.textContent.length > 0)", "the answer streaming")
        network(page, True)
        went_offline = time.monotonic()
        length_offline = page.eval(AGENT + ".map(n => n.textContent).join('').length")
        conn_seen = set()
        while time.monotonic() - went_offline < 3.0:
            conn_seen.add(page.eval("document.getElementById('conn').textContent"))
            time.sleep(0.1)
        length_online = page.eval(AGENT + ".map(n => n.textContent).join('').length")
        network(page, False)
        assert length_online < len(expected), \
            ("the answer ended while offline: not mid-stream", length_online)
        page.wait("document.getElementById('send').textContent === 'Send' && "
                  + AGENT + ".map(n => n.textContent).join('') === " + json.dumps(expected),
                  "the whole answer after reconnecting")
        texts = page.eval(AGENT + ".map(n => n.textContent)")
        assert texts == [expected], texts
        ids = page.eval("[...document.querySelectorAll('[data-item]')].map(n => n.dataset.item)")
        assert len(ids) == len(set(ids)), ("duplicate item ids", ids)
        whole = page.eval("document.getElementById('transcript').innerText")
        assert whole.count(expected) == 1, whole
        assert any("reconnecting" in c for c in conn_seen), \
            ("the page never saw the stream drop", conn_seen)
        assert length_online == length_offline, \
            ("text arrived while offline: the stream was not cut", length_offline, length_online)
        print(json.dumps({"ok": True, "mode": mode, "conn_while_offline": sorted(conn_seen),
                          "chars_at_offline": length_offline, "chars_at_online": length_online,
                          "item_ids": len(ids)}))
    finally:
        cdp.close()


if __name__ == "__main__":
    main()
