"""An MCP-speaking agent runtime delegating to this system's subagents through /mcp, with the official
MCP Python SDK (`scripts/mcp-venv` installs it into .venv-mcp):

    .venv-mcp/bin/python examples/mcp/delegate.py http://127.0.0.1:8080 alice-token

It opens a session for deep-research's subagents, prints the session's parent and the tools, runs a
`task` with progress, then starts two runs in the background and waits for the first to end.
"""

import asyncio
import sys

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


async def main(base: str, token: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(f"{base}/mcp?agent=deep-research", http_client=http)
    async with Client(transport, mode="legacy") as mcp:
        print(mcp.instructions.splitlines()[0])
        print("tools:", ", ".join(tool.name for tool in (await mcp.list_tools()).tools))

        async def progress(step, total, message):
            print(f"  progress {step:g}: {message}")

        done = await mcp.call_tool(
            "task",
            {"subagent_slug": "fact-verifier", "description": "Check: LLZO conducts lithium ions."},
            progress_callback=progress,
        )
        print("task:", done.structured_content["status"], "-", done.structured_content["result"])

        started = []
        for slug in ("research-explorer", "fact-verifier"):
            run = await mcp.call_tool("subagent_start", {"subagent_slug": slug, "description": "Survey sulfide electrolytes"})
            started.append(run.structured_content["run_id"])
        first = await mcp.call_tool("subagent_wait_any", {"run_ids": started, "timeout_seconds": 60})
        print("first to end:", first.structured_content["run"]["subagent_slug"], first.structured_content["run"]["status"])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
