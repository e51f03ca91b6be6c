"""Scope refs and keys reach the server as exactly one path segment each."""

from __future__ import annotations

from urllib.parse import unquote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import memplane

from .helpers import API_KEY, BASE_URL, Recorder, pointer_json


def _memory_reply() -> httpx.Response:
    return httpx.Response(200, json={"value": 1, "pointer": pointer_json()})


def _get_raw_path(scope: str, scope_ref: str | None, key: str) -> bytes:
    recorder = Recorder(_memory_reply())
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        client.memory.get(scope=scope, scope_ref=scope_ref, key=key)
    return recorder.only.url.raw_path


@pytest.mark.parametrize(
    ("key", "segment"),
    [
        ("a/b", b"a%2Fb"),
        ("../x", b"..%2Fx"),
        ("..", b"%2E%2E"),
        (".", b"%2E"),
        ("...", b"..."),
        ("ünï", b"%C3%BCn%C3%AF"),
        ("a b", b"a%20b"),
        ("?x#y", b"%3Fx%23y"),
        ("%2F", b"%252F"),
        ("a\\b", b"a%5Cb"),
        ("nul\x00", b"nul%00"),
        ("plain-key_1.txt~", b"plain-key_1.txt~"),
    ],
)
def test_odd_keys_are_one_encoded_segment(key: str, segment: bytes) -> None:
    assert _get_raw_path("user", "u1", key) == b"/v1/memories/user/u1/" + segment


def test_scope_ref_is_encoded_like_a_key() -> None:
    assert _get_raw_path("entity", "acme/corp", "k") == b"/v1/memories/entity/acme%2Fcorp/k"
    assert _get_raw_path("entity", "..", "k") == b"/v1/memories/entity/%2E%2E/k"


def test_explicit_scope_ref_wins_over_tenant_default() -> None:
    assert _get_raw_path("tenant", "t-ref", "k") == b"/v1/memories/tenant/t-ref/k"


@given(key=st.text(min_size=1, max_size=40))
def test_any_key_round_trips_as_the_last_segment(key: str) -> None:
    raw = _get_raw_path("user", "u1", key)

    prefix = b"/v1/memories/user/u1/"
    assert raw.startswith(prefix)
    segment = raw[len(prefix) :].decode("ascii")
    assert "/" not in segment
    assert segment not in {".", ".."}
    assert unquote(segment) == key


@pytest.mark.parametrize("scope", ["user", "agent", "team", "conversation"])
def test_scope_ref_is_required_outside_tenant_scopes(scope: str) -> None:
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(Recorder())) as client:
        with pytest.raises(ValueError, match=f"scope_ref is required for scope '{scope}'"):
            client.memory.get(scope=scope, key="k")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": "user", "scope_ref": "u1", "key": ""}, "key must be a non-empty string"),
        ({"scope": "user", "scope_ref": "", "key": "k"}, "scope_ref must be a non-empty string"),
        ({"scope": "", "scope_ref": "u1", "key": "k"}, "scope must be a non-empty string"),
    ],
)
def test_empty_segments_are_refused_before_sending(kwargs: dict[str, str], message: str) -> None:
    recorder = Recorder()
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        with pytest.raises(ValueError, match=message):
            client.memory.delete(**kwargs)
    assert recorder.requests == []
