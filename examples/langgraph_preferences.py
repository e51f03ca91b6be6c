"""A LangGraph agent that remembers a user's food preference across threads, with memplane
as its long-term store and its thread checkpointer, then forgets it on the user's erasure.

Run it against a memplane server (see examples/README.md)::

    MEMPLANE_URL=http://127.0.0.1:8080 MEMPLANE_API_KEY=<tenant admin key> \
        python examples/langgraph_preferences.py

``MEMPLANE_API_KEY`` is a tenant admin key: the script creates an agent key (for the graph)
and a compliance key (for the erasure) and revokes both at the end. If the tenant's bucket
is a local directory, set ``MEMPLANE_BUCKET_DIR`` to it and the script also lists the raw
bucket to show that nothing of the user is left there. The chat model is LangChain's
scripted fake model, so no model provider is needed. Exit code 0 only if every check holds.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

import memplane
from memplane.integrations.langgraph import MemplaneCheckpointer, MemplaneStore


class State(MessagesState):
    # What the agent node found in the store for this user, for the checks below.
    preferences: list[str]


# The scripted model answers in this order, one answer per agent turn.
ANSWERS = [
    "Noted: you prefer vegetarian food.",
    "How about a mushroom risotto tonight? It is vegetarian, as you like.",
    "What kind of food do you like?",
]


def prefs_namespace(user_id: str) -> tuple[str, ...]:
    return ("users", user_id, "preferences")


def build_graph(model: FakeMessagesListChatModel, checkpointer: MemplaneCheckpointer,
                store: MemplaneStore) -> Any:
    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        """Write a stated preference ("I prefer ...") into the user's long-term memory."""
        user_id = config["configurable"]["user_id"]
        text = str(state["messages"][-1].content)
        if "i prefer " in text.lower():
            preference = text[text.lower().index("i prefer ") + len("i prefer "):].rstrip(".!")
            store.put(prefs_namespace(user_id), "food", {"preference": preference})
        return {}

    def agent(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        """Answer with what the store knows of the user."""
        user_id = config["configurable"]["user_id"]
        found = [str(item.value["preference"]) for item in store.search(prefs_namespace(user_id))]
        system = ("The user's preferences: " + "; ".join(found)) if found else \
            "Nothing is known of the user's preferences."
        reply = model.invoke([SystemMessage(system), *state["messages"]])
        return {"messages": [reply], "preferences": found}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("agent", agent)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=checkpointer, store=store)


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            self.failed.append(what)


def bucket_files(bucket_dir: Path) -> list[Path]:
    return sorted(p for p in bucket_dir.rglob("*") if p.is_file())


def main() -> int:
    url = os.environ.get("MEMPLANE_URL")
    admin_key = os.environ.get("MEMPLANE_API_KEY")
    if not url or not admin_key:
        print("set MEMPLANE_URL and MEMPLANE_API_KEY (a tenant admin key)", file=sys.stderr)
        return 2
    bucket_env = os.environ.get("MEMPLANE_BUCKET_DIR")
    bucket_dir = Path(bucket_env) if bucket_env else None
    user_id = f"user-{uuid.uuid4().hex[:8]}"
    checks = Checks()

    with memplane.Client(url, admin_key) as admin:
        agent_key = admin.keys.create(role="agent", name="langgraph example agent")
        officer_key = admin.keys.create(role="compliance", name="langgraph example officer")
        try:
            with memplane.Client(url, agent_key.api_key) as client, \
                    memplane.Client(url, officer_key.api_key) as officer:
                run(client, officer, user_id, bucket_dir, checks)
        finally:
            admin.keys.delete(agent_key.id)
            admin.keys.delete(officer_key.id)

    if checks.failed:
        print(f"FAILED: {len(checks.failed)} check(s) did not hold")
        return 1
    print("All checks passed.")
    return 0


def run(client: memplane.Client, officer: memplane.Client, user_id: str,
        bucket_dir: Path | None, checks: Checks) -> None:
    model = FakeMessagesListChatModel(responses=[AIMessage(a) for a in ANSWERS])
    store = MemplaneStore(client)
    graph = build_graph(model, MemplaneCheckpointer(client, user_id=user_id), store)

    def turn(thread_id: str, text: str) -> dict[str, Any]:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "user_id": user_id}}
        print(f"[{thread_id}] user: {text}")
        result: dict[str, Any] = graph.invoke({"messages": [HumanMessage(text)]}, config)
        print(f"[{thread_id}] agent saw preferences {result['preferences']}; "
              f"answers: {result['messages'][-1].content}")
        return result

    print(f"Step 1: thread 1, {user_id} states a preference")
    first = turn("thread-1", "I prefer vegetarian food.")
    stored = store.get(prefs_namespace(user_id), "food")
    checks.check(stored is not None and stored.value == {"preference": "vegetarian food"},
                 "the store holds the preference under ('users', user, 'preferences')")
    checks.check(first["preferences"] == ["vegetarian food"],
                 "thread 1: the agent read the preference it just stored")

    print("Step 2: thread 2, a new thread of the same user")
    second = turn("thread-2", "What should I cook tonight?")
    checks.check(second["preferences"] == ["vegetarian food"],
                 "thread 2: the agent found the preference stored in thread 1")
    checks.check(len(second["messages"]) == 2,
                 "thread 2 started empty: thread 1's messages stayed in thread 1")

    pointers = list(client.memory.iter_pointers(user_id=user_id))
    paths = sorted(path for p in pointers
                   for path in (p.storage_path, p.embedding_storage_path) if path)
    kinds = sorted({p.memory_type or "memory" for p in pointers})
    print(f"memplane holds {len(pointers)} pointer(s) for {user_id}: {', '.join(kinds)}")
    checks.check(len(pointers) > 1 and all(p.storage_path for p in pointers),
                 "the user's store item and checkpoints are objects in the bucket")
    if bucket_dir is not None:
        present = [p for p in paths if any(f.as_posix().endswith(p)
                                          for f in bucket_files(bucket_dir))]
        print(f"bucket {bucket_dir}: {len(present)} of them found as files")
        checks.check(len(present) == len(paths), "every one of them is a file in the bucket")

    print(f"Step 3: {user_id} asks to be forgotten (erasure through the SDK)")
    job = officer.jobs.wait(officer.memory.erase_user(user_id).id, timeout=300)
    print(f"erasure job {job.state}")
    checks.check(job.state == "completed", "the erasure job completed")

    print("Step 4: what is left of the user")
    left = list(client.memory.iter_pointers(user_id=user_id))
    print(f"memplane holds {len(left)} pointer(s) for {user_id}")
    checks.check(left == [], "no pointer of the user is left (SDK listing)")
    checks.check(store.search(prefs_namespace(user_id)) == [],
                 "the store has nothing under ('users', user, 'preferences')")
    saver = MemplaneCheckpointer(client)
    checks.check(all(saver.get_tuple({"configurable": {"thread_id": t}}) is None
                     and list(saver.list({"configurable": {"thread_id": t}})) == []
                     for t in ("thread-1", "thread-2")),
                 "the checkpointer has no state for the user's threads")
    if bucket_dir is not None:
        files = bucket_files(bucket_dir)
        remaining = [p for p in paths if any(f.as_posix().endswith(p) for f in files)]
        print(f"bucket {bucket_dir}: {len(files)} file(s) in all, "
              f"{len(remaining)} of the user's objects left")
        checks.check(remaining == [], "the bucket holds none of the user's objects")

    print("Step 5: a new thread after the erasure")
    third = turn("thread-3", "What should I cook tonight?")
    checks.check(third["preferences"] == [], "thread 3: the agent no longer knows the preference")

    # Thread 3 left a checkpoint of its own: erase it too, so the example leaves nothing.
    officer.jobs.wait(officer.memory.erase_user(user_id).id, timeout=300)

if __name__ == "__main__":
    sys.exit(main())
