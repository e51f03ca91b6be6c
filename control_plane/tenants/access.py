"""The audited refusal of what a key may not see (its access list is
``control_plane.identity.Access``): answered exactly as a missing item, so a scoped key
learns nothing about what lies outside its list.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..errors import NotFound
from ..identity import Access, Actor


def ensure_visible(session: Session, actor: Actor, access: Access, scope: str, scope_ref: str,
                   *, operation: str, what: str, missing: str,
                   user_id: str | None = None) -> None:
    """Refuse what the key may not see with the very answer a missing item gets (404 and
    ``missing``, the same sentence), so a scoped key cannot tell whether anything lies
    outside its scopes. The refusal is audited (``what`` names the item in the row).

    Every route that takes a scope and scope ref — memories now; events, entries, search and
    conversations as they come — calls this before it looks anything up. A scoped agent key
    reaches its agent's teams here (one indexed lookup, never cached); ``user_id``, the data
    subject of an item already found, lets a user key see its own subject's item.
    """
    if access.may(session, scope, scope_ref, user_id):
        return
    audit.record_failure(session, actor, operation, detail=f"{what} outside the key's scopes")
    error = NotFound(missing)
    error.audited = True
    raise error
