"""Auto-Review's pause and its resume over ACP, driven by the published
ACP Python SDK (`agent-client-protocol`, pinned in ci/setup). Run by
tests/it/serve_clients.rs with the scripted model (worker and reviewer
lanes) and `approval_policy = "auto-review"`; argv: the codewhale binary,
the workspace and the writable root outside it. Prints one JSON object of
what it saw on stdout's last line.

Scenario: session/new offers the `auto_review` boolean option (on);
prompt 1 makes three writes the reviewer denies, so the breaker pauses
Auto-Review (a `config_option_update` with it off; nobody is asked);
switching it off is refused, switching it on answers the option on;
prompt 2's write is reviewed again and allowed (still nobody asked).
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse, TextContentBlock

BIN, WS = sys.argv[1], sys.argv[2]


class Editor:
    def __init__(self):
        self.updates = []
        self.permissions = 0

    async def request_permission(self, session_id, tool_call, options, **kw):
        self.permissions += 1
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="reject_once")
        )

    async def session_update(self, session_id, update, **kw):
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))


def options(opts):
    return {o.root.id if hasattr(o, "root") else o.id:
            (o.root if hasattr(o, "root") else o).current_value for o in opts or []}


async def main():
    ed = Editor()
    out = {}
    async with acp.spawn_agent_process(ed, BIN, "serve", "--acp", "-C", WS, env=dict(os.environ)) as (conn, proc):
        await conn.initialize(protocol_version=1)
        s = await conn.new_session(cwd=WS, mcp_servers=[])
        sid = s.session_id
        out["options_new"] = options(s.config_options)

        # The paused turn failed: the prompt is answered with its error.
        try:
            p1 = await conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="write three")])
            out["prompt1_error"] = None
            out["stop1"] = p1.stop_reason
        except Exception as e:
            out["prompt1_error"] = str(e)
        out["option_updates1"] = [u for u in ed.updates if u.get("sessionUpdate") == "config_option_update"]

        try:
            await conn.set_config_option(config_id="auto_review", session_id=sid, value=False)
            out["off_refused"] = None
        except Exception as e:  # the SDK raises the JSON-RPC error
            out["off_refused"] = str(e)
        r = await conn.set_config_option(config_id="auto_review", session_id=sid, value=True)
        out["options_after_on"] = options(r.config_options)

        ed.updates.clear()
        p2 = await conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="write one")])
        out["stop2"] = p2.stop_reason
        out["option_updates2"] = [u for u in ed.updates if u.get("sessionUpdate") == "config_option_update"]
        out["permissions"] = ed.permissions
    print(json.dumps(out, default=str))


asyncio.run(main())
