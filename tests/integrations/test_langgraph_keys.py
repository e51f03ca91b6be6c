"""The key and scope-ref encodings of the LangGraph integration are reversible, never make a
path separator or a dot segment the server would refuse, and hash a too-long part the same
way wherever it appears (so keys and listing prefixes agree)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memplane.integrations.langgraph import _wire

TEXT = st.text(min_size=1, max_size=80)
REFUSED = ("Cc", "Cf", "Cs", "Zl", "Zp")  # what the server refuses in keys and scope refs


@given(TEXT)
def test_a_component_round_trips_and_holds_no_separator(part: str) -> None:
    encoded = _wire.encode(part)
    assert _wire.decode(encoded) == part
    assert "/" not in encoded and "#" not in encoded
    assert encoded not in (".", "..")
    assert not [ch for ch in encoded if unicodedata.category(ch) in REFUSED]


@given(TEXT)
def test_a_scope_ref_round_trips_and_never_starts_with_a_slash(ref: str) -> None:
    encoded = _wire.encode_ref(ref)
    assert _wire.decode(encoded) == ref
    assert not encoded.startswith("/")
    assert not [ch for ch in encoded if unicodedata.category(ch) in REFUSED]


@given(st.lists(TEXT, min_size=1, max_size=3), TEXT)
def test_keys_start_with_the_prefix_of_their_namespace(parts: list[str], last: str) -> None:
    try:
        key = _wire.join("lg-store/", [*parts, last], limit=64)
    except ValueError:
        return  # too long even with hashed parts: refused with a sentence
    assert key.startswith(_wire.prefix_of("lg-store/", parts, limit=64))
    assert _wire.key_bytes(key) <= _wire.MAX_KEY_BYTES


def test_plain_ids_stay_readable_and_long_parts_are_hashed() -> None:
    assert _wire.encode("child:1|sub:2") == "child:1|sub:2"
    assert _wire.encode("a/b%c#d\n") == "a%2Fb%25c%23d%0A"
    assert _wire.encode_ref("org/7") == "org/7"
    assert _wire.encode_ref("/root\t") == "%2Froot%09"
    long = "x" * 100
    assert _wire.component(long, 64) == _wire.hashed(long)
    assert _wire.hashed(long).startswith("#") and len(_wire.hashed(long)) == 33
    with pytest.raises(ValueError, match="too deep or too long"):
        _wire.join("lg-store/", ["y" * 60] * 5, limit=64)
