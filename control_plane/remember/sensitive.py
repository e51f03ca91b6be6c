"""What remember never stores: a statement in which the DLP detector finds a sensitive value
(whatever the tenant's DLP mode). One function, so the extractor and the model path screen
alike."""

from __future__ import annotations

import re

_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_SSN = re.compile(r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)")
_PASSWORD = re.compile(r"\b(?:password|passcode|passwd|pin)\b\s*(?:is|:|=)", re.I)


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char) * (2 if index % 2 else 1)
        total += number - 9 if number > 9 else number
    return total % 10 == 0


def sensitive_kind(text: str) -> str | None:
    """The kind of the first sensitive value in ``text``, or None."""
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return "payment_card"
    if _SSN.search(text):
        return "us_ssn"
    if _PASSWORD.search(text):
        return "password"
    return None
