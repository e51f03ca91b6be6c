"""A bound on what parsing a remote JSON answer can build, checked on its bytes first.

``json.loads`` turns every bracket into a list or dict and every value into an object, and
recurses once per level of nesting: a 1 MiB answer of ``[],[],…`` becomes millions of
Python objects, and one of ``[[[[…`` exhausts the recursion limit (a ``RecursionError``, not
a ``ValueError``). A caller that parses a remote answer states how many brackets and values
an honest answer can hold and refuses one that holds more, before parsing it.
"""

from __future__ import annotations


def within_shape(raw: bytes, *, brackets: int, values: int) -> bool:
    """Whether JSON ``raw`` opens at most ``brackets`` arrays and objects and separates at
    most ``values`` values and keys (``,`` and ``:``). Counted on the bytes, strings
    included, so an honest answer's text counts against it too: callers leave room for it.
    """
    return (raw.count(b"[") + raw.count(b"{") <= brackets
            and raw.count(b",") + raw.count(b":") <= values)
