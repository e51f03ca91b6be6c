"""The audit routes (``control_plane/audit/router.py``) on a live server of this module's own
(embedded SQLite, no background sealer: rows are sealed when a route seals them), with
``--noconftest``: each route answers, and each query parameter's bounds hold from both sides
(``limit`` 1…1000, the filters' 256 characters, ``seq``/``tree_size``/``first``/``second``
1…2^63−1: a value inside the bounds reaches the proof and its own sentence, one outside is
refused as a validation error before it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.service import ServerThread, Stack, Tenant, make_settings

BIG = 2**63 - 1
INCLUSION, CONSISTENCY = "/v1/audit/proof/inclusion", "/v1/audit/proof/consistency"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir: Path = tmp_path_factory.mktemp("audit-routes")
    settings = make_settings("sqlite", data_dir, run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tenant(stack: Stack) -> Tenant:
    return stack.new_tenant()


@pytest.fixture(scope="module")
def http(tenant: Tenant) -> Iterator[httpx.Client]:
    with tenant.stack.http(tenant.admin_key) as client:
        yield client


@pytest.fixture
def size(http: httpx.Client) -> int:
    """The tree's size once the rows so far are sealed (the checkpoint seals them; the
    proofs do not seal, so it holds until the test lists the log)."""
    note = http.get("/v1/audit/checkpoint")
    assert note.status_code == 200
    return int(note.text.split("\n")[1])


def answer(http: httpx.Client, path: str, **params: Any) -> tuple[int, str, str]:
    got = http.get(path, params=params)
    body = got.json()
    return got.status_code, body.get("error", ""), body.get("detail", "")


def refused(http: httpx.Client, path: str, **params: Any) -> str:
    """The sentence of a request refused before the route ran."""
    status, error, detail = answer(http, path, **params)
    assert (status, error) == (422, "validation_error"), (path, params, detail)
    return detail


def test_every_route_answers(http: httpx.Client, size: int) -> None:
    page = http.get("/v1/audit")
    assert page.status_code == 200
    assert set(page.json()) == {"items", "next_cursor"}
    verified = http.get("/v1/audit/verify")
    assert verified.status_code == 200
    assert verified.json()["ok"] is True
    assert set(verified.json()) == {
        "ok", "checked", "unsealed", "first_bad_seq", "problem", "checkpoints_checked",
        "first_checkpoint_seq", "last_checkpoint_seq", "first_bad_checkpoint", "head_seq",
        "anchored_seq", "anchor_lag_seconds", "anchor_problem", "anchors_checked",
        "anchor_moves", "anchors_unreadable"}
    put = http.put("/v1/audit/witnesses", json=[])
    assert (put.status_code, put.json()) == (200, {"witnesses": []})
    got = http.get("/v1/audit/witnesses")
    assert (got.status_code, got.json()) == (200, {"witnesses": []})
    key = http.get("/v1/audit/verifier-key")
    assert key.status_code == 200 and key.headers["content-type"].startswith("text/plain")
    assert key.text.startswith("memplane+")
    note = http.get("/v1/audit/checkpoint")
    assert note.status_code == 200 and note.headers["content-type"].startswith("text/plain")
    inclusion = http.get(INCLUSION, params={"seq": 1, "tree_size": 1})
    assert (inclusion.status_code, inclusion.json()) == (
        200, {"leaf_index": 0, "tree_size": 1, "hashes": []})
    consistency = http.get(CONSISTENCY, params={"first": 1, "second": 1})
    assert (consistency.status_code, consistency.json()) == (
        200, {"first": 1, "second": 1, "hashes": []})


def at_least(name: str, bound: int = 1) -> str:
    return f"query.{name}: Input should be greater than or equal to {bound}"


def at_most(name: str, bound: int = BIG) -> str:
    return f"query.{name}: Input should be less than or equal to {bound}"


def test_the_page_limit_is_1_to_1000(http: httpx.Client, size: int) -> None:
    assert size >= 2
    one = http.get("/v1/audit", params={"limit": 1})
    assert one.status_code == 200 and len(one.json()["items"]) == 1
    assert one.json()["next_cursor"] is not None
    assert http.get("/v1/audit", params={"limit": 1000}).status_code == 200
    assert refused(http, "/v1/audit", limit=0) == at_least("limit")
    assert refused(http, "/v1/audit", limit=1001) == at_most("limit", 1000)


@pytest.mark.parametrize("name", ["accessor_id", "operation"])
def test_a_filter_holds_up_to_256_characters(http: httpx.Client, name: str) -> None:
    page = http.get("/v1/audit", params={name: "a" * 256})
    assert (page.status_code, page.json()) == (200, {"items": [], "next_cursor": None})
    assert refused(http, "/v1/audit", **{name: "a" * 257}) == (
        f"query.{name}: String should have at most 256 characters")


def test_a_row_and_a_tree_size_are_1_to_2_63_minus_1(http: httpx.Client, size: int) -> None:
    assert answer(http, INCLUSION, seq=1, tree_size=1)[0] == 200
    assert answer(http, INCLUSION, seq=BIG, tree_size=BIG) == (
        422, "validation_error", f"tree_size {BIG} is beyond the log's {size} sealed rows")
    assert answer(http, INCLUSION, seq=BIG, tree_size=size) == (
        422, "validation_error", f"row {BIG} is not in the tree of the first {size} rows")
    assert refused(http, INCLUSION, seq=0, tree_size=1) == at_least("seq")
    assert refused(http, INCLUSION, seq=BIG + 1, tree_size=1) == at_most("seq")
    assert refused(http, INCLUSION, seq=1, tree_size=0) == at_least("tree_size")
    assert refused(http, INCLUSION, seq=1, tree_size=BIG + 1) == at_most("tree_size")


def test_a_consistency_proof_takes_sizes_1_to_2_63_minus_1(
        http: httpx.Client, size: int) -> None:
    assert answer(http, CONSISTENCY, first=1, second=1)[0] == 200
    assert answer(http, CONSISTENCY, first=1, second=BIG) == (
        422, "validation_error", f"second {BIG} is beyond the log's {size} sealed rows")
    assert answer(http, CONSISTENCY, first=BIG, second=size) == (
        422, "validation_error", f"no consistency proof from {BIG} to {size} rows: first "
        "must be at least 1 and at most second")
    assert refused(http, CONSISTENCY, first=0, second=1) == at_least("first")
    assert refused(http, CONSISTENCY, first=BIG + 1, second=1) == at_most("first")
    assert refused(http, CONSISTENCY, first=1, second=0) == at_least("second")
    assert refused(http, CONSISTENCY, first=1, second=BIG + 1) == at_most("second")
