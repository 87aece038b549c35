"""A remote A2A agent made with the official A2A Python SDK (`a2a-sdk`, pinned by scripts/a2a-venv):
the peer a remote subagent (`spec.remote.a2a`) delegates to. `python remote_agent.py <port> <record>`
serves it on 127.0.0.1:<port> and appends one JSON line per request it executes or cancels to <record>
(the task, its context, the message's text and metadata, the `traceparent` it came with). A third
argument is the interface URL its card names in place of its own (a card that points elsewhere).

It asks every request for `Authorization: Bearer remote-secret` (401 otherwise) and answers by the
message's text: `ask ...` asks for input, and the answer to that task completes it with what was said;
`fail ...` fails; `slow ...` works until cancelled; anything else completes with the artifact
`remote answer to: <text>`. Driven by tests/local/a2a_remote.rs.
"""

import asyncio
import json
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_text_message, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

PORT, RECORD = int(sys.argv[1]), sys.argv[2]
INTERFACE = sys.argv[3] if len(sys.argv) > 3 else f"http://127.0.0.1:{PORT}/"
SECRET = "Bearer remote-secret"


def record(kind, context, **more):
    message = context.message
    line = {
        "kind": kind,
        "task_id": context.task_id,
        "context_id": context.context_id,
        "text": context.get_user_input() if message else None,
        "metadata": MessageToDict(message).get("metadata", {}) if message else {},
        "traceparent": context.call_context.state.get("headers", {}).get("traceparent"),
        **more,
    }
    with open(RECORD, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


class Remote(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        record("execute", context)
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == pb.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([pb.Part(text=f"thanks, you said: {text}")], name="answer")
            await updater.complete()
            return
        await updater.start_work(new_text_message("working on it", context_id=task.context_id, task_id=task.id))
        if text.startswith("ask"):
            await updater.requires_input(new_text_message("Which year do you mean?", context_id=task.context_id, task_id=task.id))
        elif text.startswith("fail"):
            await updater.failed(new_text_message("the remote agent could not do it", context_id=task.context_id, task_id=task.id))
        elif text.startswith("slow"):
            await asyncio.sleep(300)
        else:
            await updater.add_artifact([pb.Part(text=f"remote answer to: {text}")], name="answer")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        record("cancel", context)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class Bearer(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        if request.headers.get("authorization") != SECRET:
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)


card = pb.AgentCard(
    name="remote helper",
    description="A remote agent that answers, asks, fails or works until cancelled.",
    version="1",
    supported_interfaces=[pb.AgentInterface(url=INTERFACE, protocol_binding="JSONRPC", protocol_version="1.0")],
    capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[pb.AgentSkill(id="help", name="help", description="Helps.", tags=["help"])],
)
handler = DefaultRequestHandler(agent_executor=Remote(), task_store=InMemoryTaskStore(), agent_card=card)
app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))
app.add_middleware(Bearer)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
