"""The facade's A2A endpoints driven by the official A2A Python SDK (`a2a-sdk`, pinned by
scripts/a2a-venv), one scenario per run: `python client.py <scenario> <facade base URL>`, with the
scenario's inputs in the environment. Each scenario asserts what its name says and prints `ok <scenario>`;
a failed assertion exits non-zero with the reason. Driven by tests/local/a2a.rs.
"""

import asyncio
import json
import os
import sys
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict


def url(base, agent, namespace="default"):
    return f"{base}/a2a/{namespace}/{agent}"


async def client(base, agent, token="alice-token", streaming=True):
    """A client of `agent` with `token`, made from its card as the SDK resolves it."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    config = ClientConfig(httpx_client=http, streaming=streaming)
    return await create_client(url(base, agent), client_config=config)


def message(text=None, task_id=None, context_id=None, data=None):
    parts = [pb.Part(text=text)] if text is not None else []
    if data is not None:
        part = pb.Part()
        part.data.struct_value.update(data)
        parts.append(part)
    return pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=parts,
                      task_id=task_id or "", context_id=context_id or "")


async def stream(a2a, msg, return_immediately=False):
    """Every item of a send's stream, as dicts."""
    request = pb.SendMessageRequest(message=msg)
    request.configuration.return_immediately = return_immediately
    return [MessageToDict(item) async for item in a2a.send_message(request)]


def state_of(item):
    for key in ("task", "statusUpdate"):
        if key in item:
            return item[key]["status"]["state"]
    return None


def check(condition, what):
    if not condition:
        raise AssertionError(what)


async def research(base):
    """Fetch the card, stream a deep-research task to its end with the report as an artifact, read it
    back and find it in the list."""
    a2a = await client(base, "deep-research")
    http = httpx.AsyncClient(headers={"Authorization": "Bearer alice-token"})
    card = MessageToDict(await A2ACardResolver(http, url(base, "deep-research")).get_agent_card())
    check(card["capabilities"].get("streaming") is True, f"streaming: {card}")
    check(card["supportedInterfaces"][0]["protocolVersion"] == "1.0", card)
    check(any(s["id"] == "subagent:research-explorer" for s in card["skills"]), card["skills"])
    items = await stream(a2a, message("What is retrieval-augmented generation?"))
    check("task" in items[0], f"the stream starts with the task: {items[0]}")
    task_id, context = items[0]["task"]["id"], items[0]["task"]["contextId"]
    working = [i for i in items if state_of(i) == "TASK_STATE_WORKING"]
    check(len(working) >= 3, f"working updates as the run goes: {len(working)}")
    calls = [p["data"] for i in working for p in i["statusUpdate"]["status"].get("message", {}).get("parts", []) if "data" in p]
    check(any(c.get("name") == "subagent_start" for c in calls), f"tool calls stream as data: {calls[:3]}")
    artifacts = {i["artifactUpdate"]["artifact"]["artifactId"]: i["artifactUpdate"]["artifact"] for i in items if "artifactUpdate" in i}
    check("outputs/report.md" in artifacts, f"the report is an artifact: {list(artifacts)}")
    report = artifacts["outputs/report.md"]["parts"][0]
    check(report["text"].startswith("# Research report"), report)
    check(report.get("mediaType") == "text/markdown" and report.get("filename") == "report.md", report)
    check("answer" in artifacts, list(artifacts))
    check(state_of(items[-1]) == "TASK_STATE_COMPLETED", f"the stream ends completed: {items[-1]}")
    task = MessageToDict(await a2a.get_task(pb.GetTaskRequest(id=task_id, history_length=2)))
    check(task["status"]["state"] == "TASK_STATE_COMPLETED" and task["contextId"] == context, task["status"])
    check([a["artifactId"] for a in task["artifacts"]][:1] == ["answer"], task["artifacts"])
    check(len(task["history"]) == 2 and task["history"][-1]["role"] == "ROLE_AGENT", task["history"])
    listed = MessageToDict(await a2a.list_tasks(pb.ListTasksRequest(context_id=context)))
    check([t["id"] for t in listed["tasks"]] == [task_id], listed)
    # A second message in the same context continues the conversation as a new task.
    again = await stream(a2a, message("And its limits?", context_id=context))
    check(again[0]["task"]["contextId"] == context and again[0]["task"]["id"] != task_id, again[0])
    check(state_of(again[-1]) == "TASK_STATE_COMPLETED", again[-1])
    print(json.dumps({"task_id": task_id, "context_id": context}))


async def blocking(base):
    """A client that does not stream gets the ended task from one SendMessage."""
    a2a = await client(base, "quick-helper", streaming=False)
    items = await stream(a2a, message("Say hello"))
    check(len(items) == 1 and "task" in items[0], items)
    task = items[0]["task"]
    check(task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"])
    check(task["artifacts"][0]["parts"][0]["text"] == "done quickly", task["artifacts"])
    try:
        await stream(a2a, message("again", task_id=task["id"]))
        check(False, "an ended task took a message")
    except UnsupportedOperationError as e:
        check("takes no input" in str(e), str(e))


async def cancel(base):
    """A long task started without waiting is followed again (SubscribeToTask), cancelled, and ends
    canceled in the stream; a second cancel is refused; push notifications are not served."""
    starter, a2a = await client(base, "a2a-sleeper", streaming=False), await client(base, "a2a-sleeper")
    first = await stream(starter, message("rest"), return_immediately=True)
    check(first[0]["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), first[0])
    task_id = first[0]["task"]["id"]
    seen = []

    async def follow():
        async for item in a2a.subscribe(pb.SubscribeToTaskRequest(id=task_id)):
            seen.append(MessageToDict(item))

    # Streams a client leaves give their places back at once, while the run says nothing: more than a
    # run's places (8) are opened and left one after another.
    for _ in range(12):
        stream_of = a2a.subscribe(pb.SubscribeToTaskRequest(id=task_id))
        first_item = MessageToDict(await anext(stream_of))
        check("task" in first_item, first_item)
        await stream_of.aclose()
        await asyncio.sleep(0.1)
    following = asyncio.create_task(follow())
    await asyncio.sleep(1.0)
    cancelled = MessageToDict(await a2a.cancel_task(pb.CancelTaskRequest(id=task_id)))
    check(cancelled["status"]["state"] == "TASK_STATE_CANCELED", cancelled["status"])
    await asyncio.wait_for(following, 30)
    check(seen and "task" in seen[0], f"the stream starts with the task: {seen[:1]}")
    check(state_of(seen[-1]) == "TASK_STATE_CANCELED", f"the stream ends canceled: {seen[-1:]}")
    try:
        await a2a.cancel_task(pb.CancelTaskRequest(id=task_id))
        check(False, "an ended task was cancelled twice")
    except TaskNotCancelableError:
        pass
    try:
        await a2a.create_task_push_notification_config(pb.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:1/hook"))
        check(False, "a push notification config was taken")
    except PushNotificationNotSupportedError:
        pass


async def approval(base):
    """A task whose run waits for a person is input-required with the calls as data; `approve` in the
    same task goes on to the end."""
    a2a = await client(base, "a2a-writer")
    items = await stream(a2a, message("write the note"))
    last = items[-1]
    check(state_of(last) == "TASK_STATE_INPUT_REQUIRED", f"the stream pauses for input: {last}")
    status = last["statusUpdate"]["status"]
    asked = [p["data"] for p in status["message"]["parts"] if "data" in p][0]
    check(asked["action_requests"][0]["name"] == "write_file", asked)
    task_id, context = last["statusUpdate"]["taskId"], last["statusUpdate"]["contextId"]
    try:
        await stream(a2a, message("maybe", task_id=task_id))
        check(False, "a word that is no decision was taken")
    except InvalidParamsError as e:
        check("approve" in str(e), str(e))
    resumed = await stream(a2a, message("approve", task_id=task_id, context_id=context))
    check(resumed[0]["task"]["id"] == task_id, resumed[0])
    check(state_of(resumed[-1]) == "TASK_STATE_COMPLETED", resumed[-1])
    answer = [i["artifactUpdate"]["artifact"] for i in resumed if "artifactUpdate" in i]
    check(any(a["artifactId"] == "outputs/note.txt" for a in answer), answer)


async def stranger(base):
    """Another user's task answers exactly as an unknown one, for every method naming it; an agent the
    caller may not see answers as a missing one."""
    task_id = os.environ["TASK_ID"]
    a2a = await client(base, "deep-research", token="bob-token")
    answers = {}
    for name, ident in (("theirs", task_id), ("unknown", "0" * 32)):
        seen = []
        for call in (lambda: a2a.get_task(pb.GetTaskRequest(id=ident)),
                     lambda: a2a.cancel_task(pb.CancelTaskRequest(id=ident)),
                     lambda: stream(a2a, message("approve", task_id=ident))):
            try:
                await call()
                seen.append("answered")
            except TaskNotFoundError as e:
                seen.append(str(e).replace(ident, "<id>"))
        answers[name] = seen
    check(answers["theirs"] == answers["unknown"], answers)
    check(all(a != "answered" for a in answers["theirs"]), answers)
    listed = MessageToDict(await a2a.list_tasks(pb.ListTasksRequest()))
    check(all(t["id"] != task_id for t in listed.get("tasks", [])), listed)
    http = httpx.AsyncClient(headers={"Authorization": "Bearer bob-token"})
    private = await http.get(url(base, "alice-notes") + "/.well-known/agent-card.json")
    missing = await http.get(url(base, "no-such-agent") + "/.well-known/agent-card.json")
    check(private.status_code == missing.status_code == 404, (private.status_code, missing.status_code))
    check(private.json()["message"].replace("alice-notes", "x") == missing.json()["message"].replace("no-such-agent", "x"), private.text)
    # bob naming alice's context gets a context of his own: her conversation is neither reached nor told.
    context = os.environ["CONTEXT_ID"]
    quick = await client(base, "quick-helper", token="bob-token", streaming=False)
    mine = (await stream(quick, message("hello from bob", context_id=context)))[0]["task"]
    check(mine["contextId"] == context, mine)
    texts = [p.get("text", "") for m in mine.get("history", []) for p in m["parts"]]
    check(all("retrieval-augmented" not in t for t in texts), texts)
    alice = await client(base, "deep-research")
    hers = MessageToDict(await alice.get_task(pb.GetTaskRequest(id=task_id)))
    check(all("hello from bob" not in p.get("text", "") for m in hers["history"] for p in m["parts"]), hers["history"])
    # The card names only the subagents the caller may see.
    bob_http = httpx.AsyncClient(headers={"Authorization": "Bearer bob-token"})
    card = (await bob_http.get(url(base, "a2a-parent") + "/.well-known/agent-card.json")).json()
    ids = [skill["id"] for skill in card["skills"]]
    check("subagent:quick-helper" in ids and "subagent:alice-sub" not in ids, ids)
    check("SECRET" not in json.dumps(card), card)
    # Requests the protocol does not allow are refused naming what is wrong.
    raw = lambda body: bob_http.post(url(base, "deep-research"), json=body)
    odd_id = (await raw({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask", "params": {"id": "x"}})).json()
    check(odd_id["error"]["code"] == -32600, odd_id)
    typed = (await raw({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"historyLength": "x"}}})).json()
    check(typed["error"]["code"] == -32602 and typed["error"]["data"]["field"] == "configuration.historyLength", typed)
    other_namespace = await httpx.AsyncClient(headers={"Authorization": "Bearer alice-token"}).get(url(base, "deep-research", "elsewhere") + "/.well-known/agent-card.json")
    check(other_namespace.status_code == 404, other_namespace.status_code)
    anonymous = await httpx.AsyncClient().get(url(base, "deep-research") + "/.well-known/agent-card.json")
    check(anonymous.status_code == 401, anonymous.status_code)


async def start(base):
    """Ends a quick task and starts a slow one without waiting; prints both ids."""
    quick = await client(base, "quick-helper", streaming=False)
    done = (await stream(quick, message("Say hello")))[0]["task"]
    check(done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"])
    slow = await client(base, "a2a-slow", streaming=False)
    first = await stream(slow, message("take your time"), return_immediately=True)
    print(json.dumps({"done": done["id"], "slow": first[0]["task"]["id"]}))


async def resubscribe(base):
    """After a restart: the task that had ended reads as it ended; the one the restart stopped is
    followed to its end, failed with the reason, and reads so."""
    quick, slow = await client(base, "quick-helper"), await client(base, "a2a-slow")
    done = MessageToDict(await quick.get_task(pb.GetTaskRequest(id=os.environ["DONE"])))
    check(done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"])
    check(done["artifacts"][0]["parts"][0]["text"] == "done quickly", done["artifacts"])
    task_id = os.environ["SLOW"]
    try:
        items = [MessageToDict(i) async for i in slow.subscribe(pb.SubscribeToTaskRequest(id=task_id))]
        check(state_of(items[-1]) == "TASK_STATE_FAILED", items[-1:])
    except UnsupportedOperationError as e:
        check("has ended" in str(e), str(e))
    task = MessageToDict(await slow.get_task(pb.GetTaskRequest(id=task_id)))
    check(task["status"]["state"] == "TASK_STATE_FAILED", task["status"])
    check(task["metadata"]["yuxi.dev/run"]["status"] == "interrupted", task["metadata"])
    check(task["status"]["message"]["parts"][0]["text"], task["status"])


SCENARIOS = {f.__name__: f for f in (research, blocking, cancel, approval, stranger, start, resubscribe)}

if __name__ == "__main__":
    scenario, base = sys.argv[1], sys.argv[2]
    asyncio.run(SCENARIOS[scenario](base))
    print(f"ok {scenario}")
