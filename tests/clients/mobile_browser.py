"""Drives `app-server --mobile`'s phone page (/mobile) in Debian's
Chromium, headless, as a 390x844 phone (Emulation.setDeviceMetricsOverride
with mobile: true), over the DevTools protocol on a pipe (the Cdp and Page
classes of web_browser.py; the Python standard library only).

Usage: mobile_browser.py CHROMIUM ORIGIN WORKSPACE SCREENSHOT|-
Environment: CODEWHALE_RUNTIME_TOKEN (typed into the page, and used by
this script's own bearer checks).

A wrong token is refused (the app stays locked); the right one is typed
in; a thread is created in the page; a turn asks for approval (focus on
Deny; every button at least 44 px; no horizontal overflow), Deny (the
command did not run; the receipt says "you"), then a second turn's
Allow once (the positive control: the file appears), a third turn
steered (the message is recorded as steered) and interrupted from the
phone (the turn ends `interrupted`); the token is in
neither localStorage, sessionStorage, document.cookie, the cookie jar nor
the document; a rebinding Host gets 421. Prints one JSON line."""

import base64
import json
import os
import sys
import tempfile

from web_browser import Cdp, Page, bearer

# Every visible button, thread row, field and label (a checkbox's target
# is its label): at least 44 px high; buttons 44 px wide too.
SMALL = """[...document.querySelectorAll('button, #threads li, label, input:not([type=checkbox]), textarea')]
  .filter(e => e.getClientRects().length && getComputedStyle(e).visibility !== 'hidden')
  .map(e => { const r = e.getBoundingClientRect();
              return {what: e.id || e.className || e.tagName, w: r.width, h: r.height,
                      button: e.tagName === 'BUTTON'}; })
  .filter(b => b.h < 44 || (b.button && b.w < 44))"""
OVERFLOW = "document.documentElement.scrollWidth - window.innerWidth"


def shoot(page, path):
    if path == "-":
        return
    png = page.call("Page.captureScreenshot", {"format": "png"})["data"]
    with open(path, "wb") as f:
        f.write(base64.b64decode(png))


def checks(page, where):
    small = page.eval(SMALL)
    assert small == [], (where, "touch targets under 44 px", small)
    over = page.eval(OVERFLOW)
    assert over <= 0, (where, "horizontal overflow", over)


def type_into(page, element_id, text):
    page.eval("document.getElementById('%s').focus(); true" % element_id)
    page.call("Input.insertText", {"text": text})


def main():
    chromium, origin, workspace, shot = sys.argv[1:5]
    token = os.environ["CODEWHALE_RUNTIME_TOKEN"]
    port = origin.rsplit(":", 1)[1]
    denied = os.path.join(workspace, "mobile-denied.txt")
    allowed = os.path.join(workspace, "mobile-allowed.txt")
    profile = tempfile.mkdtemp()
    cdp = Cdp(chromium, profile, ["--host-resolver-rules=MAP evil.test 127.0.0.1"])
    try:
        page = Page(cdp)
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
        page.call("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
        page.goto(origin + "/mobile")
        page.wait("!!document.getElementById('token')", "the token field")
        assert page.eval("window.innerWidth") == 390, page.eval("window.innerWidth")
        checks(page, "locked")

        # A wrong token: refused, the app stays locked (negative control).
        type_into(page, "token", "not-the-token")
        page.eval("document.getElementById('connect').click(); true")
        page.wait("document.getElementById('unlock-error').textContent.length > 0", "the refusal")
        assert page.eval("document.getElementById('app').hidden") is True

        # The right one, typed in.
        type_into(page, "token", token)
        page.eval("document.getElementById('connect').click(); true")
        page.wait("!document.getElementById('app').hidden", "the app after the token")
        assert page.eval("document.getElementById('token').value") == "", "the field is emptied"
        # No thread yet: the threads panel is open; create one in the page.
        page.wait("document.body.classList.contains('rail-open')", "the threads panel")
        checks(page, "threads panel")
        page.eval("document.getElementById('new-thread').click(); true")
        page.wait("!document.body.classList.contains('rail-open') && "
                  "document.getElementById('conn').textContent === 'live'", "the new thread, live")
        threads = bearer(origin, "/v1/threads", token)["threads"]
        assert len(threads) == 1, threads
        tid = threads[0]["id"]

        # A turn whose command the phone denies.
        type_into(page, "prompt", "run the first command")
        page.eval("document.getElementById('send').click(); true")
        page.wait("!!document.querySelector('.card[data-appr] button.deny')", "the approval card")
        assert page.eval("document.activeElement && document.activeElement.textContent") == "Deny", \
            "focus starts on Deny"
        checks(page, "approval card")
        shoot(page, shot)
        page.eval("document.querySelector('.card button.deny').click(); true")
        page.wait("document.getElementById('transcript').innerText.includes('phone denied it')",
                  "the answer after Deny")
        page.wait("document.getElementById('send').textContent === 'Send'", "the turn's end")
        assert not os.path.exists(denied), "a denied command did not run"
        assert page.eval("document.querySelectorAll('.tool.denied').length") >= 1, "marked denied"
        detail = bearer(origin, "/v1/threads/" + tid, token)
        receipt = bearer(origin, "/v1/threads/%s/turns/%s/receipt" % (tid, detail["turns"][0]["id"]),
                         token)
        shells = [a for a in receipt["actions"] if a.get("tool") == "shell"]
        assert shells and shells[0]["decided_by"] == "you", receipt["actions"]

        # The positive control: Allow once runs the command.
        type_into(page, "prompt", "run the second command")
        page.eval("document.getElementById('send').click(); true")
        page.wait("!!document.querySelector('.card[data-appr]')", "the second card")
        page.eval("[...document.querySelectorAll('.card button.allow')]"
                  ".find(b => b.textContent === 'Allow once').click(); true")
        page.wait("document.getElementById('transcript').innerText.includes('phone allowed it')",
                  "the answer after Allow")
        page.wait("document.getElementById('send').textContent === 'Send'", "the second turn's end")
        assert os.path.exists(allowed), page.eval("document.getElementById('transcript').innerText")
        checks(page, "transcript")

        # Steer and interrupt from the phone while a turn runs.
        type_into(page, "prompt", "work for a while")
        page.eval("document.getElementById('send').click(); true")
        page.wait("document.getElementById('send').textContent === 'Steer' && "
                  "!document.getElementById('interrupt').hidden", "the running turn")
        checks(page, "running turn")
        type_into(page, "prompt", "also check the docs")
        page.eval("document.getElementById('send').click(); true")
        page.wait("[...document.querySelectorAll('.msg.user')].some(n => "
                  "n.textContent === 'also check the docs')", "the steered message")
        page.eval("document.getElementById('interrupt').click(); true")
        page.wait("document.getElementById('send').textContent === 'Send'", "the interrupted turn's end")
        turns = bearer(origin, "/v1/threads/" + tid, token)["turns"]
        assert turns[-1]["status"] == "interrupted", turns[-1]
        steered = bearer(origin, "/v1/threads/" + tid, token)["items"]
        assert any((i.get("metadata") or {}).get("steered") and
                   i["metadata"].get("text") == "also check the docs" for i in steered), steered[-3:]

        # The token: in the page's memory only.
        stored = page.eval("JSON.stringify([Object.entries(localStorage), "
                           "Object.entries(sessionStorage), document.cookie])")
        assert token not in stored and stored == '[[],[],""]', stored
        assert token not in page.eval("document.documentElement.outerHTML")
        cookies = page.call("Network.getAllCookies")["cookies"]
        assert cookies == [], cookies

        # DNS rebinding: the page under another name is refused.
        page.goto("http://evil.test:%s/mobile" % port)
        assert "not a DNS name" in page.eval("document.body.innerText"), "421 for a DNS name"
        print(json.dumps({"ok": True, "thread": tid}))
    finally:
        cdp.close()


if __name__ == "__main__":
    main()
