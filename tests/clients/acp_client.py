"""Drive `codewhale serve --acp` with the published ACP Python SDK
(`agent-client-protocol`, pinned in ci/setup): nobody here wrote the
client side. Run by tests/acp_python.rs, which starts the scripted model
server and sets HOME / CODEWHALE_HOME; argv: the codewhale binary and the
workspace. Prints one JSON object of what it saw on stdout's last line.

Scenario (the model's script is in tests/acp_python.rs):
  initialize with versions 1 and 99 (both answered 1),
  session/new, prompt 1: streamed text and a write outside the workspace
  (gate 8 asks -> session/request_permission, answered reject_once),
  session/list, prompt 2: the model hangs mid-stream, session/cancel
  -> stopReason cancelled, then session/load replays the thread.
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
        self.permissions = []
        self.first_chunk = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kw):
        self.permissions.append(
            {
                "session_id": session_id,
                "tool_call": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
            }
        )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="reject_once")
        )

    async def session_update(self, session_id, update, **kw):
        u = update.model_dump(by_alias=True, exclude_none=True)
        self.updates.append(u)
        if u.get("sessionUpdate") == "agent_message_chunk":
            self.first_chunk.set()

    # The agent must never call these: we advertise no fs/terminal.
    async def write_text_file(self, *a, **kw):
        raise RuntimeError("agent called fs/write_text_file")

    async def read_text_file(self, *a, **kw):
        raise RuntimeError("agent called fs/read_text_file")

    async def create_terminal(self, *a, **kw):
        raise RuntimeError("agent called terminal/create")


def kinds(updates):
    return [u.get("sessionUpdate") for u in updates]


async def main():
    ed = Editor()
    out = {}
    async with acp.spawn_agent_process(ed, BIN, "serve", "--acp", "-C", WS, env=dict(os.environ)) as (conn, proc):
        r1 = await conn.initialize(protocol_version=1)
        r99 = await conn.initialize(protocol_version=99)
        out["init_v1"] = r1.protocol_version
        out["init_v99"] = r99.protocol_version
        caps = r1.agent_capabilities.model_dump(by_alias=True, exclude_none=True)
        out["load_session"] = caps.get("loadSession")
        out["auth_methods"] = [m.model_dump(by_alias=True, exclude_none=True) for m in r1.auth_methods]

        s = await conn.new_session(cwd=WS, mcp_servers=[])
        sid = s.session_id
        out["modes"] = [m.id for m in s.modes.available_modes]
        out["current_mode"] = s.modes.current_mode_id

        p1 = await conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="write outside")])
        out["stop1"] = p1.stop_reason
        out["updates1"] = list(ed.updates)
        out["permissions"] = list(ed.permissions)

        ls = await conn.list_sessions()
        out["listed"] = [x.session_id for x in ls.sessions]

        ed.updates.clear()
        ed.first_chunk.clear()
        task = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="hang")])
        )
        await asyncio.wait_for(ed.first_chunk.wait(), 30)
        await conn.cancel(session_id=sid)
        p2 = await asyncio.wait_for(task, 30)
        out["stop2"] = p2.stop_reason
        out["updates2"] = list(ed.updates)

        ed.updates.clear()
        await conn.load_session(cwd=WS, session_id=sid, mcp_servers=[])
        out["replayed"] = kinds(ed.updates)
        out["replayed_updates"] = list(ed.updates)

    # What the published client's own assertions are.
    assert out["init_v1"] == 1 and out["init_v99"] == 1, out
    assert out["stop1"] == "end_turn", out["stop1"]
    assert out["stop2"] == "cancelled", out["stop2"]
    assert out["permissions"], "no session/request_permission"
    print(json.dumps(out, default=str))


asyncio.run(main())
