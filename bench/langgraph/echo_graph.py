"""The peer's side of `make bench`: a LangGraph graph that answers with the last message it was given,
the same work as the scripted echo model of yuxi-operator's side (no model is called)."""

from langgraph.graph import END, START, MessagesState, StateGraph


def echo(state: MessagesState) -> dict:
    last = state["messages"][-1]
    return {"messages": [{"role": "assistant", "content": last.content}]}


graph = StateGraph(MessagesState).add_node("echo", echo).add_edge(START, "echo").add_edge("echo", END).compile()
