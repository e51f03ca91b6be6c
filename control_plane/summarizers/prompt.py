"""The compression prompt sent to an OpenAI-compatible endpoint, versioned.

Changing the text means a new ``PROMPT_VERSION``: every compactor entry records the version
it was written with, so a summary can be traced and re-run with the same prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import EventText
from .extractive import KEEP_AT, score, sentences

PROMPT_VERSION = "compress-v1"

SYSTEM = """\
You compress an organisation's raw event log into one durable memory entry.

The events below all belong to one {scope} ({scope_ref}) and are listed oldest first. Write \
a summary that preserves every strategic decision (what was decided, by whom, when, and why), \
every relationship dynamic (who works with whom, who pushes back, who must be kept \
informed) and every recurring pattern (what keeps coming up, what keeps going wrong or \
right), with the numbers, names and dates that go with them. Drop the meeting-by-meeting \
prose: greetings, small talk, logistics, and anything repeated from an earlier event.

Rules: use only what the events say, never invent; where a later event reverses an earlier \
decision, say so; write Markdown bullets grouped under short headings (Decisions, \
Relationships, Patterns, Open items); at most {max_words} words. Answer with the summary only."""

MAX_WORDS = 400


def _event_block(event: EventText, body: str) -> str:
    return f"### {event.occurred_at:%Y-%m-%d %H:%M} UTC, {event.kind}\n{body.strip()}\n"


def _essentials(body: str) -> str:
    """The sentences of one body the extractive scorer would keep (else its first one)."""
    kept = [s for s in sentences(body) if score(s) >= KEEP_AT]
    if kept:
        return " ".join(kept)
    return next(iter(sentences(body)), "")


def user_text(events: Sequence[EventText], max_chars: int) -> str:
    """The events as one Markdown document of at most ``max_chars`` characters.

    Too long whole, each body is first reduced to its essential sentences (decisions,
    numbers, names); still too long, each body gets an equal share, cut at a word.
    """
    text = "\n".join(_event_block(e, e.body) for e in events)
    if len(text) <= max_chars:
        return text
    reduced = [(e, _essentials(e.body)) for e in events]
    text = "\n".join(_event_block(e, body) for e, body in reduced)
    if len(text) <= max_chars:
        return text
    headers = sum(len(_event_block(e, "")) + 1 for e in events)
    share = max(0, (max_chars - headers) // max(1, len(events)))
    blocks = []
    for event, body in reduced:
        if len(body) > share:
            body = body[:max(0, share - 1)].rsplit(" ", 1)[0] + "…" if share > 1 else ""
        blocks.append(_event_block(event, body))
    return "\n".join(blocks)[:max_chars]


def messages(scope: str, scope_ref: str, events: Sequence[EventText], *,
             max_chars: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM.format(scope=scope, scope_ref=scope_ref,
                                                    max_words=MAX_WORDS)},
        {"role": "user", "content": user_text(events, max_chars)},
    ]


def estimate_tokens(chat: Sequence[dict[str, str]]) -> int:
    """A conservative token count for text: one token per 3 characters, plus framing."""
    return sum(len(m["content"]) // 3 + 4 for m in chat) + 3
