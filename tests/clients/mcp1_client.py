"""Drive `codewhale serve --mcp` with the published MCP Python SDK 1.x
(`mcp`, pinned in ci/setup). Run by tests/mcp_python.rs; argv: the
codewhale binary and the workspace. Asks for protocol 2025-06-18 and
prints one JSON object of what it saw.
"""

import asyncio
import json
import os
import sys

import mcp.client.session as client_session
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

BIN, WS = sys.argv[1], sys.argv[2]
# ClientSession.initialize sends the module's LATEST_PROTOCOL_VERSION.
client_session.types.LATEST_PROTOCOL_VERSION = "2025-06-18"


def result(r):
    return {
        "is_error": r.isError,
        "text": "".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
        "structured": r.structuredContent,
    }


async def main():
    out = {}
    params = StdioServerParameters(command=BIN, args=["serve", "--mcp", "-C", WS], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            out["protocol_version"] = init.protocolVersion
            out["server"] = init.serverInfo.name
            tools = await s.list_tools()
            out["tools"] = {t.name: t.inputSchema for t in tools.tools}
            out["write"] = result(await s.call_tool("write", {"path": "hello.txt", "content": "hi\n"}))
            out["read"] = result(await s.call_tool("read", {"path": "hello.txt"}))
            out["outside"] = result(
                await s.call_tool("write", {"path": "../outside.txt", "content": "no\n"})
            )
            out["run"] = result(await s.call_tool("codewhale_sandbox_run", {"argv": ["cat", "hello.txt"]}))
            out["bad_args"] = result(await s.call_tool("write", {"path": "x"}))
            try:
                await s.call_tool("no_such_tool", {})
                out["unknown"] = None
            except McpError as e:
                out["unknown"] = {"code": e.error.code, "message": e.error.message}
    assert out["protocol_version"] == "2025-06-18", out
    print(json.dumps(out, default=str))


asyncio.run(main())
