"""How deep a request body nests JSON, measured before anything parses it."""

from __future__ import annotations

import re

# Request bodies may nest JSON this deep at most (a memory value inside its body one level
# less). Deeper input is refused with 422 before anything parses it: the JSON parser, the
# validator and the serialiser all recurse, and the serialiser gives up at 255 levels.
MAX_JSON_DEPTH = 64
# A string with its escapes; an unterminated one runs to the end, so every match attempt
# succeeds and cutting strings out stays linear however the body is malformed.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")


def nests_deeper(body: bytes, limit: int) -> bool:
    """Whether JSON ``body`` nests arrays/objects more than ``limit`` levels deep.

    Cheap, all at C speed: a body with no more brackets than the limit cannot; otherwise the
    strings are cut out, the brackets kept (``{}`` counted as ``[]``) and the innermost pairs
    removed, one level per pass: a body that is empty within ``limit`` passes is shallow
    enough. A pass that removes nothing means malformed JSON, left for the parser to describe.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    # Without escapes, quotes alternate opening and closing strings: the outside is the rest.
    outside = (b"".join(body.split(b'"')[0::2]) if b"\\" not in body
               else _JSON_STRING.sub(b"", body))
    rest = outside.translate(_AS_SQUARE, _NOT_BRACKETS)
    for _ in range(limit):
        shorter = rest.replace(b"[]", b"")
        if not shorter:
            return False
        if len(shorter) == len(rest):
            return False
        rest = shorter
    return True
