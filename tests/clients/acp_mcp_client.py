"""Drive `codewhale serve --acp` with the published ACP Python SDK
(`agent-client-protocol`, pinned in ci/setup), passing MCP servers in
`session/new` the way an editor does. Run by tests/it/serve_clients.rs, which
starts the scripted model and sets HOME / CODEWHALE_HOME; argv: the
codewhale binary, the workspace and the fixture server's script. Prints
one JSON object of what it saw on stdout's last line.

Scenario (the model's script is in tests/it/serve_clients.rs):
  initialize; session/new with a stdio server named "My Notes" (the
  write_note fixture) and an http server (not advertised: refused);
  prompt 1: the model calls mcp__My-Notes__write_note, gate 8 asks ->
  session/request_permission answered allow_once, the sandboxed server
  writes the file; session/new without servers, prompt 2: the model calls
  the same tool there, which that session does not offer.
"""

import asyncio
import json
import os
import shutil
import sys

import acp
from acp.schema import (
    AllowedOutcome,
    EnvVariable,
    HttpMcpServer,
    McpServerStdio,
    RequestPermissionResponse,
    TextContentBlock,
)

BIN, WS, SCRIPT = sys.argv[1], sys.argv[2], sys.argv[3]
# ACP: `command` is an absolute path.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")


class Editor:
    def __init__(self):
        self.updates = []
        self.permissions = []

    async def request_permission(self, session_id, tool_call, options, **kw):
        self.permissions.append(tool_call.model_dump(by_alias=True, exclude_none=True))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def session_update(self, session_id, update, **kw):
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))


async def main():
    ed = Editor()
    out = {}
    async with acp.spawn_agent_process(ed, BIN, "serve", "--acp", "-C", WS, env=dict(os.environ)) as (conn, proc):
        r = await conn.initialize(protocol_version=1)
        caps = r.agent_capabilities.model_dump(by_alias=True, exclude_none=True)
        out["mcp_capabilities"] = caps.get("mcpCapabilities")

        servers = [
            McpServerStdio(name="My Notes", command=PYTHON, args=[SCRIPT],
                           env=[EnvVariable(name="NOTE_TAG", value="from-editor")]),
            HttpMcpServer(type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[]),
        ]
        s = await conn.new_session(cwd=WS, mcp_servers=servers)
        out["new_meta"] = s.field_meta
        p1 = await conn.prompt(session_id=s.session_id,
                               prompt=[TextContentBlock(type="text", text="write a note")])
        out["stop1"] = p1.stop_reason
        out["updates1"] = list(ed.updates)
        out["permissions"] = list(ed.permissions)

        ed.updates.clear()
        s2 = await conn.new_session(cwd=WS, mcp_servers=[])
        p2 = await conn.prompt(session_id=s2.session_id,
                               prompt=[TextContentBlock(type="text", text="again elsewhere")])
        out["stop2"] = p2.stop_reason
        out["updates2"] = list(ed.updates)

    assert out["stop1"] == "end_turn", out["stop1"]
    print(json.dumps(out, default=str))


asyncio.run(main())
