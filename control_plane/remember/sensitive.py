"""What remember never stores: a statement in which the DLP detector (``dlp.detect``, every
kind) finds a sensitive value, whatever the tenant's DLP mode. One function, so the built-in
extractor and the model path screen alike."""

from __future__ import annotations

from ..dlp.detect import find


def sensitive_kind(text: str) -> str | None:
    """The kind of the first sensitive value in ``text``, or None."""
    findings = find(text)
    return findings[0].kind if findings else None


def redacted(text: str) -> str:
    """``text`` with every detected value replaced by ``[redacted:<kind>]``: what the model
    endpoint is shown."""
    for finding in reversed(find(text)):
        text = f"{text[:finding.start]}[redacted:{finding.kind}]{text[finding.end:]}"
    return text
