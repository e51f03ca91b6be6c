"""A value's canonical JSON (``api.serialise``), whose SHA-256 every pointer records: the
text ``json.dumps`` writes with the canonical settings, for any JSON value."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.errors import InvalidInput
from control_plane.memories.api import serialise

TEXT = st.text(st.characters(exclude_categories=()))  # lone surrogates too
SCALARS = (st.none() | st.booleans() | st.integers() | TEXT
           | st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=300)
@given(VALUES)
def test_the_canonical_text_is_json_dumps_with_the_canonical_settings(value: Any) -> None:
    try:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: refused with a sentence, nothing written
        with pytest.raises(InvalidInput, match="surrogates not allowed"):
            serialise(value)
        return
    assert serialise(value) == expected


def test_exact_text_and_what_json_cannot_hold() -> None:
    assert serialise({"é": [1, 2.5, None, True, "a\nb"]}) == (
        '{"é":[1,2.5,null,true,"a\\nb"]}'.encode())
    with pytest.raises(InvalidInput, match="value is not valid JSON: 'utf-8' codec can't encode"):
        serialise({"a": "\ud800"})
    for bad in (math.nan, math.inf, [-math.inf]):
        with pytest.raises(InvalidInput, match="value is not valid JSON: Out of range float"):
            serialise(bad)
