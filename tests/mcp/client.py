"""The facade's /mcp driven by the official MCP Python SDK (`mcp`, pinned by scripts/mcp-venv), one
scenario per run: `python client.py <scenario> <facade base URL>`, with the scenario's inputs in the
environment. Each scenario asserts what its name says and prints `ok <scenario>`; a failed assertion
exits non-zero with the reason. Driven by tests/local/mcp.rs and tests/facade/run_tokens.rs.
"""

import asyncio
import json
import os
import sys

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client

TASKS = "io.modelcontextprotocol/tasks"
DELEGATION = ["task", "subagent_start", "subagent_status", "subagent_events", "subagent_cancel",
              "subagent_await", "subagent_wait_any"]


def client(base, token, agent=None, mode="legacy", extensions=None):
    """A client of /mcp (of `agent`) with `token`."""
    url = f"{base}/mcp" + (f"?agent={agent}" if agent else "")
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), mode=mode, extensions=extensions)


def http_tool(base, token, name, body):
    """`POST /api/tools/<name>` as the facade's HTTP clients call it: (status, JSON)."""
    response = httpx2.post(f"{base}/api/tools/{name}", json=body, headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json()


def parent_of(instructions):
    """The session's parent run and thread, as `initialize` says them."""
    words = instructions.split()
    run = words[words.index("run") + 1]
    thread = words[words.index("thread") + 1]
    return run, thread


async def raw(session, method, params):
    """A request the SDK has no method for (the tasks extension's), answered as raw JSON."""
    return await session._dispatcher.send_raw_request(method, params, {})


async def tools(base):
    async with client(base, "alice-token", agent="mcp-parent") as mcp:
        assert "The runs you start are children of parent run mcp-" in mcp.instructions, mcp.instructions
        assert "- quick-helper:" in mcp.instructions and "- sleeper:" in mcp.instructions, mcp.instructions
        listed = await mcp.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names[:7] == DELEGATION, names
        start = next(t for t in listed.tools if t.name == "subagent_start")
        assert "parent" in start.input_schema["properties"], start.input_schema
    # The stateless protocol: the same tools; the caller's own parent is in the discovery's instructions.
    async with client(base, "alice-token", agent="mcp-parent", mode="auto") as mcp:
        assert mcp.protocol_version == "2026-07-28", mcp.protocol_version
        assert [tool.name for tool in (await mcp.list_tools()).tools][:7] == DELEGATION


async def task(base):
    notes = []

    async def progress(progress, total, message):
        notes.append((progress, message))

    async with client(base, "alice-token", agent="mcp-parent") as mcp:
        done = await mcp.call_tool("task", {"subagent_slug": "slow-writer", "description": "write slowly"},
                                   progress_callback=progress)
        assert not done.is_error, done
        assert done.content[0].text.startswith("> 子智能体线程 ID: mcp-"), done.content
        assert done.structured_content["status"] == "completed", done.structured_content
        assert done.structured_content["result"] == "written", done.structured_content
        run_id = done.structured_content["run_id"]
        assert notes, "no progress notification came"
        assert all(run_id in (message or "") for _, message in notes), notes
        assert [p for p, _ in notes] == sorted(p for p, _ in notes), notes


async def start_await_cancel(base):
    async with client(base, "alice-token", agent="mcp-parent") as mcp:
        started = await mcp.call_tool("subagent_start", {"subagent_slug": "quick-helper", "description": "help"})
        run_id = started.structured_content["run_id"]
        assert started.structured_content["status"] == "started", started.structured_content
        awaited = await mcp.call_tool("subagent_await", {"run_id": run_id, "timeout_seconds": 30})
        assert awaited.structured_content["status"] == "completed", awaited.structured_content
        assert awaited.structured_content["result"] == "done quickly", awaited.structured_content
        slow = await mcp.call_tool("subagent_start", {"subagent_slug": "sleeper", "description": "rest"})
        slow_id = slow.structured_content["run_id"]
        cancelled = await mcp.call_tool("subagent_cancel", {"run_id": slow_id})
        assert cancelled.structured_content["status"] in ("cancel_requested", "cancelled"), cancelled.structured_content
        ended = await mcp.call_tool("subagent_await", {"run_id": slow_id, "timeout_seconds": 30})
        assert ended.structured_content["status"] == "cancelled", ended.structured_content
        # The parent named explicitly: one of the caller's own.
        run, thread = parent_of(mcp.instructions)
        status = await mcp.call_tool("subagent_status", {"run_id": run_id,
                                                         "parent": {"run_id": run, "thread_id": thread}})
        assert status.structured_content["status"] == "completed", status.structured_content
    print(json.dumps({"run_id": run_id, "parent_run_id": run, "parent_thread_id": thread}))


async def stranger(base):
    """Bob names Alice's run (and her session's parent): refused exactly as /api/tools refuses it."""
    run_id, parent_run, parent_thread = os.environ["RUN_ID"], os.environ["PARENT_RUN_ID"], os.environ["PARENT_THREAD_ID"]
    parent = {"run_id": parent_run, "thread_id": parent_thread}
    async with client(base, "bob-token", agent="mcp-parent") as mcp:
        for name, args in [("subagent_status", {"run_id": run_id}),
                           ("subagent_status", {"run_id": run_id, "parent": parent}),
                           ("subagent_cancel", {"run_id": run_id, "parent": parent}),
                           ("subagent_events", {"run_id": run_id, "parent": parent, "tree": True}),
                           ("subagent_await", {"run_id": run_id, "parent": parent, "timeout_seconds": 1})]:
            refused = await mcp.call_tool(name, args)
            assert refused.is_error, (name, refused)
            body = {**args, "parent": {**args.get("parent", {"run_id": "x", "thread_id": "y"}), "agent": "mcp-parent"}}
            status, over_http = http_tool(base, "bob-token", name, body)
            assert status == 404, (status, over_http)
            assert refused.structured_content == over_http, (refused.structured_content, over_http)
            missing = await mcp.call_tool(name, {**args, "run_id": "no-such-run"})
            assert missing.structured_content == refused.structured_content, (missing, refused)
    # A token that names nobody gets no session at all.
    try:
        async with client(base, "forged-token", agent="mcp-parent") as mcp:
            await mcp.list_tools()
        raise AssertionError("a forged token was served")
    except AssertionError:
        raise
    except Exception:
        pass


async def tasks(base):
    async with client(base, "alice-token", agent="mcp-parent", extensions=[advertise(TASKS)]) as mcp:
        made = await raw(mcp.session, "tools/call", {"name": "subagent_start",
                                                     "arguments": {"subagent_slug": "quick-helper", "description": "h"}})
        assert made["resultType"] == "task", made
        task_id = made["taskId"]
        for _ in range(300):
            got = await raw(mcp.session, "tasks/get", {"taskId": task_id})
            if got["status"] != "working":
                break
            await anyio.sleep(0.1)
        assert got["status"] == "completed", got
        assert got["result"]["structuredContent"]["result"] == "done quickly", got
        assert got["result"]["structuredContent"]["run_id"] == task_id, got
        slow = await raw(mcp.session, "tools/call", {"name": "subagent_start",
                                                     "arguments": {"subagent_slug": "sleeper", "description": "r"}})
        await raw(mcp.session, "tasks/cancel", {"taskId": slow["taskId"]})
        for _ in range(300):
            got = await raw(mcp.session, "tasks/get", {"taskId": slow["taskId"]})
            if got["status"] != "working":
                break
            await anyio.sleep(0.1)
        assert got["status"] == "cancelled", got
    async with client(base, "bob-token", agent="mcp-parent", extensions=[advertise(TASKS)]) as mcp:
        for task in (task_id, "no-such-task"):
            try:
                await raw(mcp.session, "tasks/get", {"taskId": task})
                raise AssertionError(f"Bob read task {task}")
            except AssertionError:
                raise
            except Exception as refused:
                assert "no such task" in str(refused), refused


async def cancel_call(base):
    """A `task` call cancelled by the client cancels its run."""
    seen = []

    async def progress(progress, total, message):
        seen.append(message or "")

    async with client(base, "alice-token", agent="mcp-parent") as mcp:
        with anyio.move_on_after(3):
            await mcp.call_tool("task", {"subagent_slug": "sleeper", "description": "rest"}, progress_callback=progress)
            raise AssertionError("the task ended before it was cancelled")
        run_id = next(m.split(":")[0] for m in seen if m)
        for _ in range(300):
            status = await mcp.call_tool("subagent_status", {"run_id": run_id})
            if status.structured_content["status"] == "cancelled":
                break
            await anyio.sleep(0.1)
        assert status.structured_content["status"] == "cancelled", status.structured_content


async def run_token(base):
    """A run token acts as its run over MCP as over HTTP: its child is its own, another run's is not."""
    token, child, other = os.environ["RUN_TOKEN"], os.environ["CHILD_RUN_ID"], os.environ["OTHER_RUN_ID"]
    async with client(base, token) as mcp:
        assert "parent run " + os.environ["RUN_ID"] in mcp.instructions, mcp.instructions
        for run_id in (child, other):
            over_mcp = await mcp.call_tool("subagent_status", {"run_id": run_id})
            status, over_http = http_tool(base, token, "subagent_status", {"parent": {}, "run_id": run_id})
            assert over_mcp.structured_content == over_http, (over_mcp.structured_content, over_http)
            assert over_mcp.is_error == (status != 200), (over_mcp, status)
        assert not (await mcp.call_tool("subagent_status", {"run_id": child})).is_error
        named = await mcp.call_tool("subagent_status", {"run_id": child, "parent": {"run_id": "x", "thread_id": "y"}})
        assert named.is_error and named.structured_content["field"] == "parent", named


async def stranger_progress(base):
    """Bob waits on Alice's run while it writes, naming it after runs of his own: refused, and never told
    a line of its progress."""
    async with client(base, "alice-token", agent="mcp-parent") as alice:
        started = await alice.call_tool("subagent_start", {"subagent_slug": "chatty", "description": "talk"})
        alices = started.structured_content["run_id"]
        async with client(base, "bob-token", agent="mcp-parent") as bob:
            own = await bob.call_tool("subagent_start", {"subagent_slug": "quick-helper", "description": "help"})
            bobs = own.structured_content["run_id"]
            notes = []

            async def progress(progress, total, message):
                notes.append(message or "")

            for _ in range(20):
                for name, args in [("subagent_await", {"run_id": alices, "timeout_seconds": 5}),
                                   ("subagent_wait_any", {"run_ids": [bobs] * 49 + [alices], "timeout_seconds": 5})]:
                    refused = await bob.call_tool(name, args, progress_callback=progress)
                    assert refused.is_error, (name, refused)
                    assert refused.structured_content["code"] == "not_found", refused.structured_content
            assert not any(alices in note for note in notes), notes
            assert not notes, notes
        await alice.call_tool("subagent_cancel", {"run_id": alices})


SCENARIOS = {f.__name__: f for f in [tools, task, start_await_cancel, stranger, tasks, cancel_call, run_token,
                                     stranger_progress]}

if __name__ == "__main__":
    scenario, base = sys.argv[1], sys.argv[2]
    asyncio.run(SCENARIOS[scenario](base))
    print(f"ok {scenario}")
