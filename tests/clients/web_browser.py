"""Drives `codewhale web`'s page in Debian's Chromium, headless, through
the Chrome DevTools Protocol over --remote-debugging-pipe (fds 3 and 4,
NUL-delimited JSON; https://chromedevtools.github.io/devtools-protocol/),
with the Python standard library only: nobody here shares code with it.

Usage: web_browser.py CHROMIUM LINK WORKSPACE SCREENSHOT|-
Environment: CODEWHALE_RUNTIME_TOKEN (a bearer client's checks only; the
browser never sees it).

It follows the link, checks the cookie is HttpOnly + SameSite=Strict and
invisible to the page, runs a turn whose write is denied in the page (the
file is not written; the receipt says "denied by you"), reloads with a
question pending (the card comes back) and allows it (the file is
written), then checks a rebinding Host and a sibling port's cross-origin
POST are refused. Prints one JSON line."""

import fcntl
import http.server
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

WAIT = 30


class Cdp:
    def __init__(self, chromium, profile, extra_args):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--user-data-dir=" + profile] + extra_args + ["about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.next_id = 0
        self.replies = {}
        self.events = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self.from_browser, 65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self.cond:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self.cond.notify_all()

    def call(self, method, params=None, session=None):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + WAIT
        with self.cond:
            while mid not in self.replies:
                left = deadline - time.monotonic()
                assert left > 0, ("no reply", method)
                self.cond.wait(left)
            reply = self.replies.pop(mid)
        assert "error" not in reply, (method, reply)
        return reply["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Page:
    def __init__(self, cdp):
        self.cdp = cdp
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = cdp.call("Target.attachToTarget",
                                {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(domain + ".enable")

    def call(self, method, params=None):
        return self.cdp.call(method, params, self.session)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        assert "exceptionDetails" not in r, (expr, r)
        return r["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete' && location.href !== 'about:blank'")

    def wait(self, expr, what=None):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                if self.eval(expr):
                    return
            except AssertionError:
                pass
            time.sleep(0.1)
        raise AssertionError("timed out waiting for " + (what or expr))


def bearer(origin, path, token, method="GET"):
    req = urllib.request.Request(origin + path, method=method,
                                 headers={"Authorization": "Bearer " + token})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=WAIT) as r:
        return json.loads(r.read())


def main():
    chromium, link, workspace, shot = sys.argv[1:5]
    token = os.environ["CODEWHALE_RUNTIME_TOKEN"]
    origin = link.split("/bootstrap/")[0]
    port = origin.rsplit(":", 1)[1]
    outside = os.path.join(os.path.dirname(workspace), "web-denied.txt")
    allowed = os.path.join(workspace, "web-allowed.txt")
    profile = tempfile.mkdtemp()
    cdp = Cdp(chromium, profile, ["--host-resolver-rules=MAP evil.test 127.0.0.1",
                                  "--window-size=1280,800"])
    sibling = None
    try:
        page = Page(cdp)
        # The link: exchanged for the cookie, then the app at /.
        page.goto(link)
        page.wait("location.pathname === '/' && !!document.getElementById('composer')",
                  "the app after the bootstrap redirect")
        assert page.eval("document.cookie") == "", "the session cookie is HttpOnly"
        cookies = page.call("Network.getCookies", {"urls": [origin + "/"]})["cookies"]
        web = [c for c in cookies if c["name"] == "codewhale_web_session"]
        assert len(web) == 1, cookies
        assert web[0]["httpOnly"] is True and web[0]["sameSite"] == "Strict", web
        assert web[0]["path"] == "/" and not web[0]["secure"], web
        assert token not in json.dumps(cookies)
        assert token not in page.eval("document.documentElement.outerHTML")
        # The same link never works twice.
        page.goto(link)
        assert "one-time link" in page.eval("document.body.innerText"), "a used link is 401"
        page.goto(origin + "/")
        page.wait("!!document.getElementById('composer')")

        # A turn whose write the page denies.
        page.eval("document.getElementById('prompt').value = 'write the file';"
                  "document.getElementById('send').click(); true")
        page.wait("!!document.querySelector('.card[data-appr] button.deny')", "the approval card")
        assert page.eval("document.activeElement && document.activeElement.textContent") == "Deny", \
            "focus starts on Deny"
        page.eval("document.querySelector('.card button.deny').click(); true")
        page.wait("document.getElementById('transcript').innerText.includes('denied then')",
                  "the turn's answer after the denial")
        page.wait("document.getElementById('send').textContent === 'Send'", "the turn's end")
        assert not os.path.exists(outside), "a denied write did not happen"
        assert page.eval("document.querySelectorAll('.tool.denied').length") >= 1, "marked denied"

        threads = bearer(origin, "/v1/threads", token)["threads"]
        assert len(threads) == 1, threads
        tid = threads[0]["id"]
        detail = bearer(origin, "/v1/threads/" + tid, token)
        turn = detail["turns"][0]["id"]
        receipt = bearer(origin, "/v1/threads/%s/turns/%s/receipt" % (tid, turn), token)
        denied = [a for a in receipt["actions"] if a.get("tool") == "write_file"]
        assert denied and denied[0]["decided_by"] == "you", receipt["actions"]
        assert denied[0]["status"] != "ok", denied

        # A question pending across a reload: the card comes back from the
        # snapshot; Allow (the positive control) writes the file.
        page.eval("document.getElementById('prompt').value = 'now write the other';"
                  "document.getElementById('send').click(); true")
        page.wait("!!document.querySelector('.card[data-appr]')", "the second card")
        page.call("Page.reload")
        page.wait("document.readyState === 'complete' && !!document.querySelector('.card[data-appr]')",
                  "the card after the reload")
        page.eval("[...document.querySelectorAll('.card button.allow')]"
                  ".find(b => b.textContent === 'Allow once').click(); true")
        page.wait("document.getElementById('transcript').innerText.includes('allowed then')",
                  "the answer after allowing")
        assert os.path.exists(allowed), page.eval("document.getElementById('transcript').innerText")
        # The footer says what the command really ran under (its item's
        # typed `enforced`), no longer the placeholder.
        page.wait("!document.getElementById('footer').textContent.includes('chosen per command')",
                  "the footer's sandbox after a command ran")
        if shot != "-":
            png = page.call("Page.captureScreenshot", {"format": "png"})["data"]
            import base64
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))

        # DNS rebinding: the same server under another name is refused.
        page.goto("http://evil.test:%s/health" % port)
        assert "Host must be" in page.eval("document.body.innerText"), "421 for a rebinding Host"

        # A sibling port's page POSTs with the cookie: refused, nothing made.
        before = len(bearer(origin, "/v1/threads?limit=500", token)["threads"])

        class Evil(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = ("<!doctype html><script>fetch('%s/v1/threads', {method: 'POST', "
                        "credentials: 'include', mode: 'no-cors', headers: {'Content-Type': "
                        "'text/plain'}, body: '{}'}).finally(() => { document.title = 'sent'; });"
                        "</script>" % origin).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        sibling = http.server.HTTPServer(("127.0.0.1", 0), Evil)
        threading.Thread(target=sibling.serve_forever, daemon=True).start()
        page.goto("http://127.0.0.1:%d/" % sibling.server_address[1])
        page.wait("document.title === 'sent'", "the sibling's POST")
        statuses = [e["params"]["response"]["status"] for e in cdp.events
                    if e.get("method") == "Network.responseReceived"
                    and e["params"]["response"]["url"] == origin + "/v1/threads"]
        after = len(bearer(origin, "/v1/threads?limit=500", token)["threads"])
        assert after == before, (before, after)
        print(json.dumps({"ok": True, "threads": after, "cross_origin_statuses": statuses}))
    finally:
        if sibling:
            sibling.shutdown()
        cdp.close()


if __name__ == "__main__":
    main()
