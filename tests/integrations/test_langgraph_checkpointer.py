"""MemplaneCheckpointer driving a real LangGraph graph through the sync client, on a live
server (SQLite and PostgreSQL): thread state survives across invocations and checkpointer
instances, lands at the documented addresses with the configured data subject, is
encrypted in the bucket and audited, and the subject's erasure removes it. The async path
is the conformance suite's (test_langgraph_conformance.py)."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

import memplane
from memplane.integrations.langgraph import MemplaneCheckpointer
from tests.support.service import Tenant


class State(TypedDict):
    said: Annotated[list[str], operator.add]


def _graph(checkpointer: MemplaneCheckpointer) -> Any:
    def echo(state: State) -> dict[str, list[str]]:
        return {"said": [f"echo {len(state['said'])}"]}

    builder = StateGraph(State)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def agent(tenant: Tenant) -> Iterator[memplane.Client]:
    with tenant.stack.client(tenant.key("agent")) as client:
        yield client


def test_a_graph_resumes_its_thread_from_memplane(agent: memplane.Client) -> None:
    config = {"configurable": {"thread_id": "thread/1", "user_id": "u-1"}}
    first = _graph(MemplaneCheckpointer(agent)).invoke({"said": ["hi"]}, config)
    # A new checkpointer (another process, say) picks the thread up where it was.
    second = _graph(MemplaneCheckpointer(agent)).invoke({"said": ["again"]}, config)

    assert first == {"said": ["hi", "echo 1"]}
    assert second == {"said": ["hi", "echo 1", "again", "echo 3"]}
    saver = MemplaneCheckpointer(agent)
    history = list(saver.list({"configurable": {"thread_id": "thread/1"}}))
    steps = [t.metadata["step"] for t in history]
    assert steps == [4, 3, 2, 1, 0, -1]  # newest first
    assert [t.checkpoint["id"] for t in history] == sorted(
        (t.checkpoint["id"] for t in history), reverse=True)
    assert list(saver.list(None, filter={"step": 3})) == [history[1]]
    assert [t.metadata["step"] for t in saver.list(
        {"configurable": {"thread_id": "thread/1"}}, before=history[1].config, limit=2)] == [2, 1]

    pointers = list(agent.memory.iter_pointers(scope="conversation"))
    assert {p.scope_ref for p in pointers} == {"thread%2F1"}  # the thread id, encoded
    assert {p.user_id for p in pointers} == {"u-1"}
    checkpoints = sorted(p.key for p in pointers if p.memory_type == "langgraph_checkpoint")
    assert checkpoints == sorted(f"lg-checkpoint//c/{t.checkpoint['id']}" for t in history)
    # Each write under its checkpoint's key.
    writes = [p.key for p in pointers if p.memory_type == "langgraph_write"]
    assert writes and all(any(k.startswith(f"{c}/w/") for c in checkpoints) for k in writes)


def test_the_users_erasure_removes_the_thread_state(tenant: Tenant,
                                                    agent: memplane.Client) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    graph = _graph(MemplaneCheckpointer(agent, user_id="erased"))
    graph.invoke({"said": [marker]}, {"configurable": {"thread_id": "t-erased"}})
    _graph(MemplaneCheckpointer(agent, user_id="kept")).invoke(
        {"said": ["stay"]}, {"configurable": {"thread_id": "t-kept"}})
    objects = tenant.objects()
    assert objects and not any(marker.encode() in p.read_bytes() for p in objects)
    kept = sum(1 for p in agent.memory.iter_pointers(user_id="kept"))

    with tenant.stack.client(tenant.key("compliance")) as officer:
        job = officer.jobs.wait(officer.memory.erase_user("erased").id, timeout=120)
    assert job.state == "completed", job.error

    saver = MemplaneCheckpointer(agent)
    assert saver.get_tuple({"configurable": {"thread_id": "t-erased"}}) is None
    assert list(saver.list({"configurable": {"thread_id": "t-erased"}})) == []
    assert saver.get_tuple({"configurable": {"thread_id": "t-kept"}}) is not None
    assert len(tenant.objects()) == kept


def test_every_checkpoint_access_is_audited(tenant: Tenant, agent: memplane.Client) -> None:
    saver = MemplaneCheckpointer(agent, user_id="u-2")
    config = {"configurable": {"thread_id": "t-audit", "checkpoint_ns": ""}}
    stored = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    saver.put_writes(stored, [("said", "x"), ("said", "y")], "task-1")
    tup = saver.get_tuple(stored)
    assert tup is not None and tup.pending_writes == [("task-1", "said", "x"),
                                                      ("task-1", "said", "y")]
    saver.delete_thread("t-audit")
    assert saver.get_tuple(stored) is None

    with tenant.client() as admin:
        rows = [(e.operation, e.success) for e in admin.audit.iter()
                if e.operation in ("write", "read", "list", "delete")]
    assert rows == [("write", True),                                     # put
                    ("write", True), ("write", True),                    # put_writes
                    ("list", True), ("read", True), ("read", True), ("read", True),
                    ("list", True), ("delete", True), ("delete", True), ("delete", True),
                    ("list", True)]                                     # get_tuple: none


def test_delete_thread_leaves_the_conversations_other_memories(
        agent: memplane.Client) -> None:
    agent.memory.set(scope="conversation", scope_ref="t-mixed", key="summary", value="kept")
    saver = MemplaneCheckpointer(agent)
    saver.put({"configurable": {"thread_id": "t-mixed", "checkpoint_ns": ""}},
              empty_checkpoint(), {"step": -1}, {})
    saver.delete_thread("t-mixed")
    assert [p.key for p in agent.memory.iter_pointers(scope="conversation")] == ["summary"]


def test_long_namespaces_are_hashed_into_keys_and_still_read_back(
        agent: memplane.Client) -> None:
    saver = MemplaneCheckpointer(agent)
    ns = "|".join(f"subgraph{n}:{uuid.uuid4()}" for n in range(4))  # > 96 bytes encoded
    stored = saver.put({"configurable": {"thread_id": "t-long", "checkpoint_ns": ns}},
                       empty_checkpoint(), {"step": 0}, {})
    saver.put_writes(stored, [("ch", 1)], "task")
    tup = saver.get_tuple({"configurable": {"thread_id": "t-long", "checkpoint_ns": ns}})
    assert tup is not None
    assert tup.config["configurable"]["checkpoint_ns"] == ns
    assert tup.pending_writes == [("task", "ch", 1)]
    assert [t.config for t in saver.list({"configurable": {"thread_id": "t-long"}})] == [
        tup.config]
    keys = [p.key for p in agent.memory.iter_pointers(scope="conversation")]
    assert all(k.startswith("lg-checkpoint/#") and len(k) < 255 for k in keys)


def test_namespaces_named_like_the_layout_parts_stay_apart(agent: memplane.Client) -> None:
    saver = MemplaneCheckpointer(agent)
    stored = {}
    for ns in ("", "c", "w", "c/w"):
        config = {"configurable": {"thread_id": "t-parts", "checkpoint_ns": ns}}
        stored[ns] = saver.put(config, empty_checkpoint(), {"step": 0, "ns": ns}, {})
        saver.put_writes(stored[ns], [("ch", ns)], "task")
    for ns, config in stored.items():
        named = saver.get_tuple(config)
        latest = saver.get_tuple({"configurable": {"thread_id": "t-parts",
                                                   "checkpoint_ns": ns}})
        assert named is not None and latest is not None
        assert named.config == latest.config == config
        assert named.pending_writes == latest.pending_writes == [("task", "ch", ns)]
        assert named.metadata["ns"] == ns


def test_a_checkpointer_refuses_calls_it_has_no_client_for(tenant: Tenant) -> None:
    with pytest.raises(ValueError, match="give a memplane.Client"):
        MemplaneCheckpointer()
    saver = MemplaneCheckpointer(aclient=memplane.AsyncClient(tenant.stack.base_url, "k"))
    with pytest.raises(RuntimeError, match="no memplane.Client for sync calls"):
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    with memplane.Client(tenant.stack.base_url, "k") as client, \
            pytest.raises(ValueError, match="unknown prune strategy"):
        MemplaneCheckpointer(client).prune(["t"], strategy="oldest")


def _step(saver: MemplaneCheckpointer, thread: str, parent: dict[str, Any] | None,
          n: int, writes: int) -> dict[str, Any]:
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"said": [f"m{n}"]}
    stored = saver.put(config, checkpoint, {"source": "loop", "step": n}, {})
    if writes:
        saver.put_writes(stored, [("said", f"w{n}-{i}") for i in range(writes)], f"task-{n}")
    return stored


def _sent(agent: memplane.Client, read: Any) -> tuple[Any, list[tuple[str, str, dict[str, Any]]]]:
    """What ``read()`` answered, and the requests it sent."""
    sent: list[tuple[str, str, dict[str, Any]]] = []
    real = agent._send

    def spy(call: Any) -> Any:
        answer = real(call)
        sent.append((call.method, call.path, dict(call.params or {})))
        return answer

    agent._send = spy  # type: ignore[method-assign]
    try:
        return read(), sent
    finally:
        agent._send = real  # type: ignore[method-assign]


def test_the_newest_checkpoint_costs_one_short_listing_however_long_the_thread(
        agent: memplane.Client) -> None:
    saver = MemplaneCheckpointer(agent)
    stored = None
    for n in range(40):
        stored = _step(saver, "t-long-thread", stored, n, writes=2)
    assert stored is not None
    latest, sent = _sent(agent, lambda: saver.get_tuple(
        {"configurable": {"thread_id": "t-long-thread"}}))
    named, sent_named = _sent(agent, lambda: saver.get_tuple(stored))
    assert latest is not None and named is not None
    assert latest.config["configurable"]["checkpoint_id"] == (
        stored["configurable"]["checkpoint_id"])
    assert latest.checkpoint["channel_values"] == {"said": ["m39"]}
    assert latest.pending_writes == [("task-39", "said", "w39-0"),
                                     ("task-39", "said", "w39-1")]
    assert (named.config, named.checkpoint, named.pending_writes) == (
        latest.config, latest.checkpoint, latest.pending_writes)
    # One page of 4 keys with their values (its two writes, then it): the same one request
    # at 40 checkpoints as at one; the named one is one listing of its key's prefix.
    assert [(method, path) for method, path, _ in sent + sent_named] == [
        ("GET", "/v1/pointers"), ("GET", "/v1/pointers")]
    assert {k: sent[0][2][k] for k in ("order", "limit", "include_values")} == {
        "order": "key_desc", "limit": "4", "include_values": "true"}
    assert sent_named[0][2]["include_values"] == "true"


def test_a_checkpoint_with_more_writes_than_the_first_page_reads_on(
        agent: memplane.Client) -> None:
    saver = MemplaneCheckpointer(agent)
    first = _step(saver, "t-many-writes", None, 0, writes=1)
    second = _step(saver, "t-many-writes", first, 1, writes=6)
    latest, sent = _sent(agent, lambda: saver.get_tuple(
        {"configurable": {"thread_id": "t-many-writes"}}))
    assert latest is not None and latest.config == second
    assert latest.pending_writes == [("task-1", "said", f"w1-{i}") for i in range(6)]
    assert [(p["limit"], "cursor" in p) for _, _, p in sent] == [("4", False), ("16", True)]


def test_threads_stored_before_writes_moved_under_their_checkpoint_still_read_back(
        agent: memplane.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from memplane.integrations.langgraph import _checkpoint_layout as layout
    from memplane.integrations.langgraph import _checkpoint_steps as steps

    # As the earlier layout stored them: writes at lg-checkpoint/<ns>/w/<id>/…, checkpoints
    # without the layout tag.
    with monkeypatch.context() as old:
        old.setattr(steps, "NESTED_TAG", layout.TAG)
        old.setattr(steps, "write_key", lambda ns, cid, task, idx: steps._wire.join(
            layout.ROOT, [ns, "w", cid, task, str(idx)], limit=layout.PART_LIMIT))
        saver = MemplaneCheckpointer(agent)
        first = _step(saver, "t-old", None, 0, writes=1)
        second = _step(saver, "t-old", first, 1, writes=1)
    keys = sorted(p.key for p in agent.memory.iter_pointers(scope="conversation"))
    assert sum("//w/" in k for k in keys) == 2
    saver = MemplaneCheckpointer(agent)
    saver.put_writes(second, [("said", "late")], "task-late")  # this version: nested
    latest = saver.get_tuple({"configurable": {"thread_id": "t-old"}})
    named = saver.get_tuple(first)
    assert latest is not None and named is not None
    assert latest.config == second and sorted(latest.pending_writes) == [
        ("task-1", "said", "w1-0"), ("task-late", "said", "late")]
    assert named.pending_writes == [("task-0", "said", "w0-0")]
    assert [t.config for t in saver.list({"configurable": {"thread_id": "t-old"}})] == [
        second, first]
    saver.prune(["t-old"], strategy="keep_latest")
    left = sorted(p.key for p in agent.memory.iter_pointers(scope="conversation"))
    assert len(left) == 3  # the newest checkpoint and its two writes, old and new places
    assert saver.get_tuple(first) is None
