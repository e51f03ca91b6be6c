"""The KEK rotation request's bounds: a key reference is 1 to 512 characters (a KMS key
ARN or alias fits; an empty one is refused rather than read as "the server's")."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from control_plane.keys.schemas import RotateIn


def test_a_key_ref_of_1_to_512_characters_is_taken() -> None:
    assert RotateIn.model_validate({"key_ref": "k"}).key_ref == "k"
    assert RotateIn.model_validate({"key_ref": "a" * 512}).key_ref == "a" * 512
    assert RotateIn.model_validate({}).key_ref is None


@pytest.mark.parametrize(("key_ref", "message"), [
    ("", "String should have at least 1 character"),
    ("a" * 513, "String should have at most 512 characters"),
])
def test_an_empty_or_overlong_key_ref_is_refused(key_ref: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RotateIn.model_validate({"key_ref": key_ref})
