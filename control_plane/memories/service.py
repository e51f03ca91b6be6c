"""Memories by key: the write, read and delete protocols of DESIGN §4.

Write (``write.py``) — object first, then the pointer; read (``read.py``) — look up, fetch,
hash, compare (I3), audit; delete (``delete.py``) — mark ``pending_delete``, delete the
object, then the row. ``shared.py`` holds what the three share (the key-scope check, subject
keys, the sealed audit address). This module is the domain's one entry point.

These protocols commit at the steps their modules name, because the bucket is not part of
the database transaction; everything else commits through the request's session.
"""

from __future__ import annotations

from ..idempotency import Replay
from .delete import clear_scope, delete_value
from .read import MemoryValue, get_value, list_pointers, page_of_pointers, read_pointer
from .shared import ensure_visible
from .write import append_value, serialise, set_value

__all__ = [
    "MemoryValue", "Replay", "append_value", "clear_scope", "delete_value", "ensure_visible",
    "get_value", "list_pointers", "page_of_pointers", "read_pointer", "serialise", "set_value",
]
