"""Cutting a knowledge document into chunks small enough to embed and retrieve one by one.

Sizes: each chunk holds at most :data:`CHUNK_CHARS` (800) characters of new text, cut at the
last paragraph break (a blank line) that fits, else the last sentence end, else the last
space, else hard at 800. Every chunk after the first starts with up to :data:`OVERLAP_CHARS`
(100) characters ending the previous chunk, from a word boundary, so a sentence cut across
two chunks is found from either; a chunk is therefore at most 901 characters. 800 characters
are about 200 tokens of English, well inside the 256 tokens the [semantic] model reads.
A document of at most 800 characters is one chunk, unchanged apart from surrounding space.
"""

from __future__ import annotations

import re

CHUNK_CHARS = 800
OVERLAP_CHARS = 100

_SENTENCE_END = re.compile(r"[.!?…。](?:[\"')\]]*)\s")


def chunk(text: str, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = _cut(text, start, size)
        pieces.append(text[start:end].strip())
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
    chunks = [pieces[0]]
    for previous, piece in zip(pieces, pieces[1:], strict=False):
        chunks.append(f"{_tail(previous, overlap)} {piece}".strip())
    return [c for c in chunks if c]


def _cut(text: str, start: int, size: int) -> int:
    """Where the piece starting at ``start`` ends (exclusive)."""
    limit = start + size
    if limit >= len(text):
        return len(text)
    window = text[start:limit + 1]  # +1: a break right after the limit still fits
    floor = size // 3  # never cut a piece shorter than a third of the size
    paragraph = window.rfind("\n\n")
    if paragraph >= floor:
        return start + paragraph
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() >= floor]
    if ends:
        return start + min(ends[-1], size)
    space = max(window.rfind(" "), window.rfind("\n"))
    if space >= floor:
        return start + space
    return limit


def _tail(text: str, overlap: int) -> str:
    """The last ``overlap`` characters of ``text``, from the first word boundary in them."""
    if len(text) <= overlap:
        return text
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1:] if 0 <= space < len(tail) - 1 else tail
