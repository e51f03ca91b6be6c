"""Keys and scope refs are confined to one path segment under their scope (I5)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.errors import InvalidInput
from control_plane.memories.addresses import MemoryAddress, Scope

PREFIX = "tenants/t1"


@given(scope_ref=st.text(min_size=1, max_size=80), key=st.text(min_size=1, max_size=80))
def test_any_accepted_key_stays_inside_its_scope_prefix(scope_ref: str, key: str) -> None:
    try:
        address = MemoryAddress.parse(Scope.user, scope_ref, key)
    except InvalidInput as refused:
        assert refused.detail  # refused inputs always say why
        return
    path = f"{PREFIX}/{address.object_path('v1')}"
    scope_dir = f"{PREFIX}/{address.scope_dir()}/"
    assert path.startswith(scope_dir)
    rest = path[len(scope_dir):].split("/")
    assert len(rest) == 2 and rest[1] == "v1.json"
    assert unquote(rest[0]) == key
    assert unquote(scope_dir.split("/")[-2]) == scope_ref
    assert all(part not in ("", ".", "..") for part in path.split("/"))


@given(a=st.text(min_size=1, max_size=40), b=st.text(min_size=1, max_size=40))
def test_distinct_keys_never_share_a_path(a: str, b: str) -> None:
    try:
        pa = MemoryAddress.parse(Scope.user, "u", a).object_path("v")
        pb = MemoryAddress.parse(Scope.user, "u", b).object_path("v")
    except InvalidInput:
        return
    assert (pa == pb) == (a == b)


@pytest.mark.parametrize("key, phrase", [
    ("..", "'.' or '..'"), (".", "'.' or '..'"), ("../x", "'.' or '..'"),
    ("a/../../b", "'.' or '..'"), ("/etc/passwd", "absolute"), ("a\x00b", "U+0000"),
    ("a\nb", "U+000A"), ("a\u202eb", "U+202E"), ("", "must not be empty"),
    ("k" * 256, "at most 255 characters"), ("ü" * 100, "too long once encoded"),
])
def test_bad_keys_are_refused_with_the_reason(key: str, phrase: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        MemoryAddress.parse(Scope.user, "u1", key)
    assert phrase in refused.value.detail


def test_tenant_scope_needs_dash_and_institutional_is_an_alias() -> None:
    assert MemoryAddress.parse(Scope.institutional, "-", "k").scope == "tenant"
    with pytest.raises(InvalidInput):
        MemoryAddress.parse(Scope.tenant, "acme", "k")
