"""The iterators follow ``next_cursor`` lazily, one request per page."""

from __future__ import annotations

import httpx
import pytest

import memplane

from .helpers import API_KEY, BASE_URL, Recorder, audit_json, page_json, pointer_json

THREE_POINTER_PAGES = (
    httpx.Response(200, json=page_json([pointer_json(key="a"), pointer_json(key="b")], "c1")),
    httpx.Response(200, json=page_json([pointer_json(key="c")], "c2")),
    httpx.Response(200, json=page_json([pointer_json(key="d")], None)),
)


def test_iter_pointers_walks_three_pages_with_the_same_filters() -> None:
    recorder = Recorder(*THREE_POINTER_PAGES)
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        keys = [p.key for p in client.memory.iter_pointers(scope="user", limit=2)]

    assert keys == ["a", "b", "c", "d"]
    assert [str(r.url) for r in recorder.requests] == [
        f"{BASE_URL}/v1/pointers?scope=user&limit=2",
        f"{BASE_URL}/v1/pointers?scope=user&limit=2&cursor=c1",
        f"{BASE_URL}/v1/pointers?scope=user&limit=2&cursor=c2",
    ]


def test_iter_pointers_fetches_the_next_page_only_when_needed() -> None:
    recorder = Recorder(*THREE_POINTER_PAGES)
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        pointers = client.memory.iter_pointers()
        assert recorder.requests == []

        assert [next(pointers).key, next(pointers).key] == ["a", "b"]
        assert len(recorder.requests) == 1

        assert next(pointers).key == "c"
        assert len(recorder.requests) == 2


def test_iter_pointers_over_an_empty_first_page_makes_one_request() -> None:
    recorder = Recorder(httpx.Response(200, json=page_json([])))
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        assert list(client.memory.iter_pointers(user_id="u1")) == []

    assert str(recorder.only.url) == f"{BASE_URL}/v1/pointers?user_id=u1"


def test_audit_iter_walks_three_pages() -> None:
    recorder = Recorder(
        httpx.Response(200, json=page_json([audit_json(seq=1)], "x1")),
        httpx.Response(200, json=page_json([audit_json(seq=2), audit_json(seq=None)], "x2")),
        httpx.Response(200, json=page_json([audit_json(seq=3)])),
    )
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        seqs = [e.seq for e in client.audit.iter(operation="erase")]

    assert seqs == [1, 2, None, 3]
    assert [str(r.url) for r in recorder.requests] == [
        f"{BASE_URL}/v1/audit?operation=erase",
        f"{BASE_URL}/v1/audit?operation=erase&cursor=x1",
        f"{BASE_URL}/v1/audit?operation=erase&cursor=x2",
    ]


def test_an_error_mid_iteration_raises_after_the_items_already_yielded() -> None:
    recorder = Recorder(
        httpx.Response(200, json=page_json([pointer_json(key="a")], "c1")),
        httpx.Response(403, json={"error": "forbidden", "detail": "role lacks read"}),
    )
    seen: list[str | None] = []
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        with pytest.raises(memplane.Forbidden, match="role lacks read"):
            for pointer in client.memory.iter_pointers():
                seen.append(pointer.key)

    assert seen == ["a"]
