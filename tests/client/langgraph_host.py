"""A LangGraph host whose tool node runs `transfer_funds` only through `approved_tool_call`.

Imported by tests/client/test_langgraph_tools.py (the graph, in process) and run as its
own process (the same graph, a checkpoint saved to and restored from a file):

    langgraph_host.py start  --state FILE     run until the approval pauses the graph, save, exit
    langgraph_host.py resume --state FILE     another process: restore, wait for the decision, resume

The model is scripted: it calls the tool once, then answers with what the tool said.
Environment: CONTROLPLANE_URL, CONTROLPLANE_TOKEN, CONTROLPLANE_PUBLIC_KEYS, TOOL_LOG (a
file each tool run appends to), KILL_IN_TOOL=1 (the tool kills its own process: a host
that dies between claim and complete). Prints one JSON line: what happened.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import signal
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from hitl_controlplane.client import AsyncControlPlane, ControlPlane, DecisionRefused
from hitl_controlplane.client.langgraph_tools import aapproved_tool_call, answer_approvals, approved_tool_call

THREAD = "thread-lg"
CONFIG = {"configurable": {"thread_id": THREAD}}
ARGS = {"amount": 120, "to": "acme"}


class AgentState(TypedDict):
    messages: Annotated[list, add_messages]


def _compiled(model: Callable[..., Any], tools: Callable[..., Any], saver) -> Any:
    graph = StateGraph(AgentState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver or InMemorySaver())


def _model(args: dict) -> Callable[[AgentState], dict]:
    def model(state: AgentState) -> dict:
        said = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if not said:
            call = {"name": "transfer_funds", "args": args, "id": "call_1", "type": "tool_call"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=f"The tool said: {said[-1].content}")]}

    return model


def build_graph(cp: ControlPlane, tool: Callable[..., Any], *, run_id: str = "run-lg", saver=None, args=ARGS):
    def tools(state: AgentState) -> dict:
        call = state["messages"][-1].tool_calls[0]
        text = approved_tool_call(cp, call, tool, thread_id=THREAD, run_id=run_id, timeout=30)
        return {"messages": [ToolMessage(content=str(text), tool_call_id=call["id"])]}

    return _compiled(_model(args), tools, saver)


def build_async_graph(acp: AsyncControlPlane, tool: Callable[..., Any], *, run_id: str = "run-lg-async", saver=None):
    """The same graph with an async tool node on `aapproved_tool_call` (run it with `ainvoke`)."""

    async def tools(state: AgentState) -> dict:
        call = state["messages"][-1].tool_calls[0]
        text = await aapproved_tool_call(acp, call, tool, thread_id=THREAD, run_id=run_id, timeout=30)
        return {"messages": [ToolMessage(content=str(text), tool_call_id=call["id"])]}

    return _compiled(_model(ARGS), tools, saver)


def model_read(state: dict) -> list[str]:
    """What the tool results the model read were."""
    return [m.content for m in state["messages"] if isinstance(m, ToolMessage)]


def save(saver: InMemorySaver, path: str) -> None:
    stored = {thread: {ns: dict(c) for ns, c in by_ns.items()} for thread, by_ns in saver.storage.items()}
    with open(path, "wb") as handle:
        pickle.dump({"storage": stored, "writes": dict(saver.writes), "blobs": dict(saver.blobs)}, handle)


def load(path: str) -> InMemorySaver:
    with open(path, "rb") as handle:
        saved = pickle.load(handle)  # noqa: S301 - the test's own file
    saver = InMemorySaver()
    for thread, by_ns in saved["storage"].items():
        saver.storage[thread] = defaultdict(dict, by_ns)
    saver.writes.update(saved["writes"])
    saver.blobs.update(saved["blobs"])
    return saver


def transfer_funds(amount: int, to: str) -> str:
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"amount": amount, "to": to}) + "\n")
    if os.environ.get("KILL_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)  # claimed, ran, never completed
    return f"sent {amount} to {to}"


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume"])
    parser.add_argument("--state", required=True)
    args = parser.parse_args()
    with ControlPlane(os.environ["CONTROLPLANE_URL"], os.environ["CONTROLPLANE_TOKEN"], poll_wait=5) as cp:
        if args.mode == "start":
            saver = InMemorySaver()
            state = build_graph(cp, transfer_funds, saver=saver).invoke({"messages": [("user", "Pay acme.")]}, CONFIG)
            save(saver, args.state)
            return {"request_id": state["__interrupt__"][0].value["request_id"]}
        graph = build_graph(cp, transfer_funds, saver=load(args.state))
        try:
            resume = answer_approvals(cp, graph.get_state(CONFIG).interrupts, timeout=30)
            state = graph.invoke(Command(resume=resume), CONFIG)
        except DecisionRefused as refused:
            return {"refused": str(refused)}
        return {"model_read": model_read(state), "final": state["messages"][-1].content}


if __name__ == "__main__":
    print(json.dumps(main()))
    sys.stdout.flush()
