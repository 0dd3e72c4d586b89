"""Drive `codewhale serve --mcp` with the published MCP Python SDK 2.x
(`mcp`, pinned in ci/setup) in its default `auto` mode: it probes
`server/discover`, gets -32601 and falls back to `initialize`. Run by
tests/mcp_python.rs; argv: the codewhale binary and the workspace.
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters

BIN, WS = sys.argv[1], sys.argv[2]


async def main():
    out = {}
    params = StdioServerParameters(command=BIN, args=["serve", "--mcp", "-C", WS], env=dict(os.environ))
    async with Client(params) as c:
        s = c.session
        out["protocol_version"] = s.protocol_version
        out["discovered"] = s.discover_result is not None
        out["initialized"] = s.initialize_result is not None
        tools = await c.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)
        r = await c.call_tool("read", {"path": "hello.txt"})
        out["read_is_error"] = r.is_error
        out["read_text"] = "".join(getattr(b, "text", "") for b in r.content)
    print(json.dumps(out, default=str))


asyncio.run(main())
