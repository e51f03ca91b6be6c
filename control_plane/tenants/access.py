"""The audited refusal of what a key may not see or write (its access list is
``control_plane.identity.Access``). A read, or anything addressed by an id, is answered
exactly as a missing item, so a scoped key learns nothing about what lies outside its list; a
write to an address the caller names is refused with 403 and a sentence saying the key's
scopes do not include it (the answer depends on the key's own list only, never on what is
stored there).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..errors import Forbidden, NotFound
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


def ensure_in_scopes(session: Session, actor: Actor, access: Access, scope: str,
                     scope_ref: str, *, operation: str, what: str) -> None:
    """Refuse a write (or delete) to an address the caller names outside the key's scopes:
    403, saying so plainly. Whether the address holds anything is never looked at first, so
    the answer tells nothing the key's own list does not. Audited like ``ensure_visible``."""
    if access.may(session, scope, scope_ref):
        return
    audit.record_failure(session, actor, operation, detail=f"{what} outside the key's scopes")
    where = f"{scope}/{scope_ref}"
    if access.user_id is not None:
        sentence = (f"this key's scopes do not include {where}: a user key writes only its "
                    f"own data subject's memory (user/{access.user_id})")
    else:
        sentence = (f"this key's scopes do not include {where}: write there with a key whose "
                    f"scopes list it (an admin sets a key's scopes when creating it)")
    error = Forbidden(sentence)
    error.audited = True
    raise error
