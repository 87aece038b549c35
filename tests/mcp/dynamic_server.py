"""An MCP server made with the official MCP Python SDK (`mcp`, pinned by scripts/mcp-venv) whose tools
change while it runs: `python dynamic_server.py <port> [token]` serves streamable HTTP at
http://127.0.0.1:<port>/mcp with the tool `search` (read-only); `POST /control/add` adds
`delete_note` (destructive) and `POST /control/remove` removes it, each announcing the change to the
clients subscribed to tool list changes (`notifications/tools/list_changed`). With a token, every MCP request needs
`Authorization: Bearer <token>` (401 otherwise). Driven by tests/kube/mcp_servers.rs.
"""

import sys

import uvicorn
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.subscriptions import ToolsListChanged
from mcp.types import NotificationParams, ToolAnnotations
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

PORT = int(sys.argv[1])
TOKEN = sys.argv[2] if len(sys.argv) > 2 else None

server = MCPServer("dynamic-docs")


def search(query: str) -> str:
    """Searches the documents."""
    return f"found: {query}"


def delete_note(name: str) -> str:
    """Deletes a note."""
    return f"deleted {name}"


server.add_tool(search, annotations=ToolAnnotations(readOnlyHint=True))

# Tool list changes are announced: on 2026-07-28 to `subscriptions/listen` streams (the SDK's bus), and
# before it to every initialized session on its standing stream, as capabilities.tools.listChanged says.
lowlevel = server._lowlevel_server
handshake_options = lowlevel.create_initialization_options
lowlevel.create_initialization_options = lambda *args, **kwargs: handshake_options(
    notification_options=NotificationOptions(tools_changed=True)
)
sessions = set()


async def on_initialized(ctx, params):
    sessions.add(ctx.session)


lowlevel.add_notification_handler("notifications/initialized", NotificationParams, on_initialized)


def drop_delete_note():
    try:
        server.remove_tool("delete_note")
    except Exception:  # not there: nothing to remove
        pass


async def announce():
    await server._subscriptions.publish(ToolsListChanged())
    for session in list(sessions):
        try:
            await session.send_tool_list_changed()
        except Exception:  # a client that went away
            sessions.discard(session)


async def add(request):
    drop_delete_note()
    server.add_tool(delete_note, annotations=ToolAnnotations(destructiveHint=True))
    await announce()
    return JSONResponse({"tools": "added"})


async def remove(request):
    drop_delete_note()
    await announce()
    return JSONResponse({"tools": "removed"})


class Bearer(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        if TOKEN and request.url.path.startswith("/mcp") and request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)


mcp_app = server.streamable_http_app(streamable_http_path="/mcp")
app = Starlette(
    routes=[Route("/control/add", add, methods=["POST"]), Route("/control/remove", remove, methods=["POST"]), Mount("/", app=mcp_app)],
    lifespan=mcp_app.router.lifespan_context,
)
app.add_middleware(Bearer)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
