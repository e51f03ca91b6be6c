"""``client.events``, ``client.entries``, ``client.compactor`` and ``client.summarizer``:
the requests they send (sync and async alike) and how they read the answers.

The real server's answers are in ``test_events_entries_server.py``; here a recording
transport shows the exact URL, query and body of each call.
"""

from __future__ import annotations

import importlib
import runpy
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import memplane

from .helpers import API_KEY, BASE_URL, POINTER_ID, Recorder, body_of, page_json, pointer_json

EVENT_ID = "3f0d6a52-7c1e-4b2a-9d8f-1e2c3b4a5d6e"
UNASYNC = Path(__file__).resolve().parents[2] / "scripts" / "unasync.py"


def event_json(**fields: Any) -> dict[str, Any]:
    return {"id": EVENT_ID, "scope": "entity", "scope_ref": "ent_acme", "kind": "decision",
            "source": "call", "source_ref": "call-7", "user_id": None, "agent_id": None,
            "occurred_at": "2026-01-02T03:04:05Z", "compressed_at": None,
            "content_sha256": "cd" * 32, "content_size": 40, "sync_status": "synced",
            "created_at": "2026-01-02T03:04:06Z", **fields}


def entry_json(**fields: Any) -> dict[str, Any]:
    return {**pointer_json(scope="entity", scope_ref="ent_acme", key=None, memory_type="entry",
                           title="ROAS target", tags=["decision"], importance=4,
                           source="manual", user_id=None),
            "summary": "Keep ROAS above 3.", **fields}


def job_json(**fields: Any) -> dict[str, Any]:
    return {"id": "j-1", "kind": "compact", "state": "queued", "progress": {}, "result": None,
            **fields}


def _sync(recorder: Recorder) -> memplane.Client:
    return memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder))


def _async(recorder: Recorder) -> memplane.AsyncClient:
    return memplane.AsyncClient(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder))


def test_the_sync_namespaces_are_generated_from_the_async_ones() -> None:
    argv = sys.argv
    sys.argv = [str(UNASYNC), "--check"]
    try:
        with pytest.raises(SystemExit) as exited:
            runpy.run_path(str(UNASYNC), run_name="__main__")
    finally:
        sys.argv = argv
    assert exited.value.code == 0, "a generated sync SDK file is stale: run scripts/unasync.py"


@pytest.mark.parametrize(("model", "schema"), [
    (memplane.Event, "control_plane.events.schemas:EventOut"),
    (memplane.EventWithBody, "control_plane.events.schemas:EventWithBodyOut"),
    (memplane.Entry, "control_plane.entries.schemas:EntryOut"),
], ids=["Event", "EventWithBody", "Entry"])
def test_the_models_have_the_server_answers_fields(model: type[BaseModel], schema: str) -> None:
    module, name = schema.split(":")
    server = getattr(importlib.import_module(module), name)
    assert set(model.model_fields) == set(server.model_fields)


def test_event_append_sends_the_columns_and_the_idempotency_key() -> None:
    recorder = Recorder(httpx.Response(201, json=event_json()))
    with _sync(recorder) as client:
        event = client.events.append(
            "entity", "ent_acme", "decision", "# Call\nROAS target 3.", source="call",
            source_ref="call-7", occurred_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            user_id="u1", idempotency_key="k-1")

    request = recorder.only
    assert (request.method, str(request.url)) == ("POST", f"{BASE_URL}/v1/events")
    assert body_of(request) == {"scope": "entity", "scope_ref": "ent_acme", "kind": "decision",
                                "body": "# Call\nROAS target 3.", "source": "call",
                                "source_ref": "call-7",
                                "occurred_at": "2026-01-02T03:04:05+00:00", "user_id": "u1"}
    assert request.headers["idempotency-key"] == "k-1"
    assert (event.id, event.kind, event.compressed_at) == (EVENT_ID, "decision", None)
    assert event.occurred_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_event_get_list_and_iter() -> None:
    recorder = Recorder(
        httpx.Response(200, json={**event_json(), "body": "# Call"}),
        httpx.Response(200, json=page_json([event_json()], "c1")),
        httpx.Response(200, json=page_json([event_json(id="e-2")], "c2")),
        httpx.Response(200, json=page_json([event_json(id="e-3")])),
    )
    with _sync(recorder) as client:
        event = client.events.get(EVENT_ID)
        page = client.events.list(scope="entity", scope_ref="ent_acme", kind="decision",
                                  since=datetime(2026, 1, 1, tzinfo=UTC),
                                  include_compressed=True, limit=1)
        rest = [e.id for e in client.events.iter(scope="entity", limit=1)]

    assert event.body == "# Call"
    assert (page.items[0].id, page.next_cursor) == (EVENT_ID, "c1")
    assert rest == ["e-2", "e-3"]
    assert [str(r.url) for r in recorder.requests] == [
        f"{BASE_URL}/v1/events/{EVENT_ID}",
        f"{BASE_URL}/v1/events?scope=entity&scope_ref=ent_acme&kind=decision"
        "&since=2026-01-01T00%3A00%3A00%2B00%3A00&include_compressed=true&limit=1",
        f"{BASE_URL}/v1/events?scope=entity&limit=1",
        f"{BASE_URL}/v1/events?scope=entity&limit=1&cursor=c2",
    ]


def test_entry_create_get_update_delete_list() -> None:
    recorder = Recorder(
        httpx.Response(201, json=entry_json()),
        httpx.Response(200, json=entry_json()),
        httpx.Response(200, json=entry_json(importance=5, version=4)),
        httpx.Response(204),
        httpx.Response(200, json=page_json([entry_json(summary=None)])),
    )
    with _sync(recorder) as client:
        created = client.entries.create("entity", "ent_acme", "ROAS target",
                                        "Keep ROAS above 3.", tags=("decision",), importance=4,
                                        source="manual")
        read = client.entries.get(POINTER_ID)
        updated = client.entries.update(POINTER_ID, title="ROAS target",
                                        summary="Keep ROAS above 3.", importance=5)
        client.entries.delete(POINTER_ID)
        page = client.entries.list(scope="entity", scope_ref="ent_acme", tag="decision",
                                   search="ROAS", min_importance=3)

    assert (created.summary, created.key, read.title) == ("Keep ROAS above 3.", None,
                                                          "ROAS target")
    assert (updated.importance, updated.version) == (5, 4)
    assert page.items[0].summary is None
    assert [(r.method, str(r.url)) for r in recorder.requests] == [
        ("POST", f"{BASE_URL}/v1/entries"),
        ("GET", f"{BASE_URL}/v1/entries/{POINTER_ID}"),
        ("PUT", f"{BASE_URL}/v1/entries/{POINTER_ID}"),
        ("DELETE", f"{BASE_URL}/v1/entries/{POINTER_ID}"),
        ("GET", f"{BASE_URL}/v1/entries?scope=entity&scope_ref=ent_acme&tag=decision"
                "&search=ROAS&min_importance=3"),
    ]
    assert body_of(recorder.requests[0]) == {
        "scope": "entity", "scope_ref": "ent_acme", "title": "ROAS target",
        "summary": "Keep ROAS above 3.", "tags": ["decision"], "importance": 4,
        "source": "manual"}
    assert body_of(recorder.requests[2]) == {"title": "ROAS target",
                                             "summary": "Keep ROAS above 3.", "importance": 5}


def test_an_id_is_one_path_segment() -> None:
    recorder = Recorder(httpx.Response(404, json={"error": "not_found", "detail": "no entry"}))
    with _sync(recorder) as client, pytest.raises(memplane.NotFound):
        client.entries.get("../v1/api-keys")
    assert recorder.only.url.raw_path == b"/v1/entries/..%2Fv1%2Fapi-keys"


def summarizer_json(**fields: Any) -> dict[str, Any]:
    return {"provider": "openai_compatible", "base_url": "https://llm.example/v1",
            "model": "m", "has_api_key": True, "timeout_seconds": 20.0, "max_retries": 2,
            "token_budget_per_run": 5000, "prompt_version": "compress-v1",
            "configured_at": "2026-01-02T03:04:05Z", **fields}


OFFLINE = summarizer_json(provider="extractive", base_url=None, model="extractive-v1",
                          has_api_key=False, timeout_seconds=None, max_retries=None,
                          token_budget_per_run=None, configured_at=None)


def test_compactor_and_summarizer_config() -> None:
    recorder = Recorder(
        httpx.Response(202, json=job_json()),
        httpx.Response(200, json=summarizer_json()),
        httpx.Response(200, json=OFFLINE),
        httpx.Response(200, json=OFFLINE),
    )
    with _sync(recorder) as client:
        job = client.compactor.run(dry_run=True)
        saved = client.summarizer.set_config(base_url="https://llm.example/v1", model="m",
                                             api_key="sk-1", timeout_seconds=20,
                                             token_budget_per_run=5000)
        current = client.summarizer.get_config()
        deleted = client.summarizer.delete_config()

    assert (job.kind, job.state, job.finished) == ("compact", "queued", False)
    assert (saved.has_api_key, saved.token_budget_per_run) == (True, 5000)
    assert current == deleted
    assert (current.provider, current.base_url, current.has_api_key) \
        == ("extractive", None, False)
    assert [(r.method, r.url.path) for r in recorder.requests] == [
        ("POST", "/v1/compactor/run"), ("PUT", "/v1/summarizer/config"),
        ("GET", "/v1/summarizer/config"), ("DELETE", "/v1/summarizer/config")]
    assert body_of(recorder.requests[0]) == {"dry_run": True}
    assert body_of(recorder.requests[1]) == {"base_url": "https://llm.example/v1",
                                             "model": "m", "api_key": "sk-1",
                                             "timeout_seconds": 20,
                                             "token_budget_per_run": 5000}


def test_compactor_scope_thresholds_and_provenance() -> None:
    config = {"min_events": 5, "older_than_days": 30, "enabled": True,
              "schedule": "17 6 * * *", "next_run_at": "2026-01-03T06:17:00Z",
              "updated_at": "2026-01-02T03:04:05Z"}
    provenance = {"entry_id": POINTER_ID, "scope": "entity", "scope_ref": "ent_acme",
                  "provider": "extractive", "model": "extractive-v1",
                  "prompt_version": "extractive-v1", "event_count": 1, "job_id": None,
                  "created_at": "2026-01-02T03:04:05Z",
                  "events": [{"event_id": EVENT_ID, "event_sha256": "cd" * 32}]}
    recorder = Recorder(httpx.Response(202, json=job_json()),
                        httpx.Response(200, json=config), httpx.Response(200, json=config),
                        httpx.Response(200, json=provenance))
    with _sync(recorder) as client:
        client.compactor.run(scope="entity", scope_ref="ent_acme")
        saved = client.compactor.set_config(min_events=5, older_than_days=30)
        read = client.compactor.get_config()
        traced = client.compactor.provenance(POINTER_ID)

    assert saved == read
    assert (read.min_events, read.schedule) == (5, "17 6 * * *")
    assert [(e.event_id, e.event_sha256) for e in traced.events] == [(EVENT_ID, "cd" * 32)]
    assert [(r.method, r.url.path) for r in recorder.requests] == [
        ("POST", "/v1/compactor/run"), ("PUT", "/v1/compactor/config"),
        ("GET", "/v1/compactor/config"), ("GET", f"/v1/compactor/provenance/{POINTER_ID}")]
    assert body_of(recorder.requests[0]) == {"dry_run": False, "scope": "entity",
                                             "scope_ref": "ent_acme"}
    assert body_of(recorder.requests[1]) == {"min_events": 5, "older_than_days": 30}


def test_errors_map_like_the_rest_of_the_sdk() -> None:
    recorder = Recorder(
        httpx.Response(422, json={"error": "validation_error", "detail": "body.kind: required"}),
        httpx.Response(403, json={"error": "forbidden", "detail": "agent keys cannot"}),
        httpx.Response(409, json={"error": "subject_erasure_in_progress", "detail": "wait"}),
    )
    with _sync(recorder) as client:
        with pytest.raises(memplane.BadRequest, match="body.kind: required"):
            client.events.append("entity", "e", "", "x")
        with pytest.raises(memplane.Forbidden):
            client.compactor.run()
        with pytest.raises(memplane.SubjectErasureInProgress):
            client.entries.create("user", "u1", "t", "s", user_id="u1")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_client_sends_the_same_requests(anyio_backend: str) -> None:
    sync_recorder, async_recorder = (
        Recorder(httpx.Response(201, json=event_json()),
                 httpx.Response(200, json=page_json([event_json()], "c1")),
                 httpx.Response(200, json=page_json([event_json(id="e-2")])),
                 httpx.Response(200, json=entry_json()),
                 httpx.Response(204),
                 httpx.Response(202, json=job_json()))
        for _ in range(2))
    with _sync(sync_recorder) as client:
        client.events.append("entity", "ent_acme", "decision", "b", idempotency_key="i")
        sync_ids = [e.id for e in client.events.iter(kind="decision")]
        client.entries.update(POINTER_ID, title="t", summary="s", tags=["a"])
        client.entries.delete(POINTER_ID)
        client.compactor.run()
    async with _async(async_recorder) as aclient:
        await aclient.events.append("entity", "ent_acme", "decision", "b", idempotency_key="i")
        async_ids = [e.id async for e in aclient.events.iter(kind="decision")]
        await aclient.entries.update(POINTER_ID, title="t", summary="s", tags=["a"])
        await aclient.entries.delete(POINTER_ID)
        await aclient.compactor.run()

    assert sync_ids == async_ids == [EVENT_ID, "e-2"]
    sent = [[(r.method, str(r.url), r.content, r.headers.get("idempotency-key"))
             for r in recorder.requests] for recorder in (sync_recorder, async_recorder)]
    assert sent[0] == sent[1]
    assert len(sent[0]) == 6
