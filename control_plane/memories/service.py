"""Memories by key: the write, read and delete protocols of DESIGN §4.

Write (``write.py``, with its fast and general paths in ``write_fast.py`` and
``write_general.py``) — object first, then the pointer; read (``read.py``) — look up, fetch,
hash, compare (I3), audit; delete (``delete.py``) — mark ``pending_delete``, delete the
object, then the row. ``shared.py`` holds what the three share (the key-scope check, subject
keys, the sealed audit address). This module is the domain's one entry point for memories
by key; the protocol steps other domains build their own objects on (entries, events,
retention) are the domain's public write/delete API in ``api.py``.

These protocols commit at the steps their modules name, because the bucket is not part of
the database transaction; everything else commits through the request's session.
"""

from __future__ import annotations

from ..idempotency import Replay
from .delete import clear_scope, delete_value
from .read import MemoryValue, get_value, list_pointers, page_of_pointers, read_pointer
from .shared import ensure_in_scope, ensure_visible
from .write import append_value, set_value

__all__ = [
    "MemoryValue", "Replay", "append_value", "clear_scope", "delete_value", "ensure_in_scope",
    "ensure_visible",
    "get_value", "list_pointers", "page_of_pointers", "read_pointer", "set_value",
]
