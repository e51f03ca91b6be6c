"""Every read, write, delete, search, export and erasure appends an audit row — failed ones
included, and a request answered with work already queued too: the event lists' refusals,
an erasure already queued, an API key that is not there or cannot be made."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.service import (
    ServerThread,
    Stack,
    Tenant,
    isolated_database,
    make_settings,
)

CURSOR = ("validation_error: cursor is not valid; pass the next_cursor value of the previous "
          "page unchanged")


@pytest.fixture(scope="module")
def quiet(database: str, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without a job worker: a queued erasure stays queued."""
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path_factory.mktemp("audited"), run_jobs=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def _rows(http: Any, operation: str) -> list[tuple[bool, str]]:
    page = http.get("/v1/audit", params={"operation": operation, "limit": 1000})
    assert page.status_code == 200, page.text
    return [(row["success"], row["detail"]) for row in page.json()["items"]]


def _one_new_row(http: Any, operation: str, method: str, url: str,
                 **request: Any) -> tuple[Any, tuple[bool, str]]:
    before = _rows(http, operation)
    answer = http.request(method, url, **request)
    after = _rows(http, operation)
    assert after[:len(before)] == before
    new = after[len(before):]
    assert len(new) == 1, new
    return answer, new[0]


@pytest.mark.parametrize(("route", "params", "sentence"), [
    ("/v1/events", {"cursor": "%%%"}, CURSOR),
    ("/memory/events", {"cursor": "%%%"}, CURSOR),
    ("/v1/events", {"scope_ref": "ent_acme"},
     "validation_error: scope_ref needs scope: pass both, e.g. ?scope=entity&scope_ref=…"),
    ("/v1/events", {"since": "2026-01-31T00:00:00"},
     "validation_error: since needs a timezone, e.g. 2026-01-31T00:00:00Z"),
], ids=["cursor", "memory-cursor", "scope-ref-alone", "naive-date"])
def test_a_refused_event_list_is_audited(tenant: Tenant, route: str, params: dict[str, str],
                                         sentence: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer, row = _one_new_row(http, "list", "GET", route, params=params)
    assert answer.status_code == 422
    assert row == (False, f"events {sentence}")


def test_an_erasure_already_queued_is_audited(quiet: Stack) -> None:
    tenant = quiet.new_tenant()
    with quiet.http(tenant.admin_key) as http:
        first, queued = _one_new_row(http, "erase", "POST", "/v1/subjects/bob/erase")
        again, returned = _one_new_row(http, "erase", "POST", "/v1/subjects/bob/erase")
    assert (first.status_code, again.status_code) == (202, 202)
    job = first.json()["id"]
    assert again.json()["id"] == job
    assert queued == (True, f"erasure job {job} queued")
    assert returned == (True, f"erasure job {job} already queued; returned")


def test_a_missing_api_key_and_a_refused_one_are_audited(tenant: Tenant) -> None:
    missing = uuid.uuid4()
    with tenant.stack.http(tenant.admin_key) as http:
        gone, revoke = _one_new_row(http, "key_revoke", "DELETE", f"/v1/api-keys/{missing}")
        refused, create = _one_new_row(http, "key_create", "POST", "/v1/api-keys", json={
            "role": "compliance", "name": "dpo", "agent_id": "bot"})
    assert gone.status_code == 404
    assert revoke == (False, f"key {missing} not_found: no active API key with that id in "
                             f"this tenant")
    assert refused.status_code == 422
    assert create == (False, "role compliance validation_error: only agent keys take scopes "
                             "and an agent_id; a compliance key always sees the whole "
                             "tenant, so leave both out or use role 'agent'")
