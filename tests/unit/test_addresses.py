"""Keys and scope refs are confined to one path segment under their scope (I5).

The properties draw from two strategies: ``valid_segments`` generates only inputs the
rules allow (so "every valid input is accepted and round-trips" cannot pass by refusing
everything), and the mixed properties count what they accepted and refused, so they fail if
either side was never exercised.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from urllib.parse import quote, unquote

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from control_plane.addresses import MemoryAddress, Scope, nfc
from control_plane.errors import InvalidInput

PREFIX = "tenants/t1"
REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
EXAMPLES = 200


def allowed(value: str) -> bool:
    """The rules of ``validate_segment``, restated independently of it."""
    value = nfc(value)
    return (value != "" and len(value) <= 255 and not value.startswith("/")
            and all(unicodedata.category(ch) not in REFUSED_CATEGORIES for ch in value)
            and all(part not in (".", "..") for part in value.split("/"))
            and len(quote(value, safe="")) <= 255)


# Characters the rules allow, with the ones that matter for paths drawn often.
_chars = st.one_of(st.sampled_from("/.%~ _-:\\?#é"),
                   st.characters(exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"]))
valid_segments = st.text(_chars, min_size=1, max_size=30).filter(allowed)


def _inside(scope_ref: str, key: str) -> MemoryAddress:
    """Parse, then check the path stays in one segment under its scope and decodes back."""
    address = MemoryAddress.parse(Scope.user, scope_ref, key)
    path = f"{PREFIX}/{address.object_path('v1')}"
    scope_dir = f"{PREFIX}/{address.scope_dir()}/"
    assert path.startswith(scope_dir)
    rest = path[len(scope_dir):].split("/")
    assert len(rest) == 2 and rest[1] == "v1.json"
    assert unquote(rest[0]) == nfc(key) == address.key
    assert unquote(scope_dir.split("/")[-2]) == nfc(scope_ref) == address.scope_ref
    assert path.count("/") == PREFIX.count("/") + 5  # no input added a path level
    assert all(part not in ("", ".", "..") for part in path.split("/"))
    return address


@given(scope_ref=valid_segments, key=valid_segments)
def test_every_valid_key_is_accepted_and_round_trips(scope_ref: str, key: str) -> None:
    address = _inside(scope_ref, key)
    again = MemoryAddress.parse(Scope.user, address.scope_ref, address.key)
    assert again == address  # parsing the stored form changes nothing


def test_any_accepted_key_stays_inside_its_scope_prefix() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=EXAMPLES)
    @given(scope_ref=st.one_of(valid_segments, st.text(min_size=1, max_size=80)),
           key=st.one_of(valid_segments, st.text(max_size=80)))
    def check(scope_ref: str, key: str) -> None:
        expected = allowed(scope_ref) and allowed(key)
        try:
            _inside(scope_ref, key)
        except InvalidInput as refused:
            assert not expected, f"refused a valid input: {refused.detail}"
            assert refused.detail.startswith(("scope_ref ", "key "))  # says what to fix
            event("refused")
            seen["refused"] += 1
            return
        assert expected, "accepted an input the rules refuse"
        event("accepted")
        seen["accepted"] += 1

    check()
    # Not vacuous: both outcomes were exercised (hypothesis may replay or shrink, so the
    # total is not fixed, but each side must have been reached many times).
    assert seen["accepted"] >= EXAMPLES // 4, seen
    assert seen["refused"] >= EXAMPLES // 20, seen


_variants = st.sampled_from(["same", "nfd", "suffix", "slash-encoded", "case"])


def _variant(a: str, how: str) -> str:
    if how == "same":
        return a
    if how == "nfd":
        return unicodedata.normalize("NFD", a)
    if how == "suffix":
        return a + "x"
    if how == "slash-encoded":
        return a.replace("/", "%2F") if "/" in a else a + "%2F"
    return a.swapcase()


@given(a=valid_segments, how=_variants)
def test_distinct_keys_never_share_a_path(a: str, how: str) -> None:
    b = _variant(a, how)
    if not allowed(b):
        b = a + "x"
    pa = MemoryAddress.parse(Scope.user, "u", a).object_path("v")
    pb = MemoryAddress.parse(Scope.user, "u", b).object_path("v")
    # One key, one path: the same after normalisation (NFC) share it, any other never does.
    assert (pa == pb) == (nfc(a) == nfc(b))


def test_a_key_typed_decomposed_is_the_same_key() -> None:
    composed, decomposed = "jos\u00e9", "jose\u0301"
    assert composed != decomposed
    assert (MemoryAddress.parse(Scope.user, "u", decomposed).object_path("v")
            == MemoryAddress.parse(Scope.user, "u", composed).object_path("v")
            == "memories/user/u/jos%C3%A9/v.json")


def test_the_generator_of_valid_segments_is_checked_against_the_code() -> None:
    # ``allowed`` restates the rules; these fixed cases keep it honest in both directions.
    for value in ["k", "a/b", "a%2Fb", "...", ".a", "a.", "~", "é", "k" * 255, "ü" * 42]:
        assert allowed(value)
        MemoryAddress.parse(Scope.user, "u", value)
    for value in ["", ".", "..", "a/./b", "/a", "a\x00", "\u202e", "k" * 256, "ü" * 43]:
        assert not allowed(value)
        with pytest.raises(InvalidInput):
            MemoryAddress.parse(Scope.user, "u", value)


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


@pytest.mark.parametrize("code", range(128))
def test_each_ascii_character_is_refused_exactly_when_the_rules_say(code: int) -> None:
    """ASCII keys skip the per-character look-up: every one of the 128 still gets the rules'
    answer, and a refusal names the character."""
    key = f"a{chr(code)}b"
    if allowed(key):
        assert MemoryAddress.parse(Scope.user, "u", key).key == key
        return
    with pytest.raises(InvalidInput) as refused:
        MemoryAddress.parse(Scope.user, "u", key)
    assert refused.value.detail == (f"key must not contain control or format characters "
                                    f"(found U+{code:04X})")
