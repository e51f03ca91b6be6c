"""What an erasure clears besides the subject's memories, events and keys (DESIGN §1 I4,
§11, §12): every control-plane row that still names the subject or one of its scopes.

- **jobs** of any kind and state that name the subject (its id as ``subject``, or its id,
  percent-encoded id or conversation ids anywhere in ``params``, ``result``, ``progress`` or
  ``error``): the subject becomes the keyed hash (``pseudonyms.py``), names in parameters
  become the hash, an error message that names them keeps only its code (a storage error
  quotes paths with the subject's key names), and a cleanup job of the subject's scope
  keeps only the parameters its own completion keeps (it then finishes with nothing to do);
- **agent keys** whose access list grants the subject's scopes (``user/<id>``, its
  conversations): those grants name the hash instead; a key left with nothing but such
  grants reaches nothing anymore and is revoked, with an audit row;
- **GC tombstones** (``gc_candidates``) under the subject's prefixes and under the key
  directories of its deleted pointers: their paths carry the id and the key names;
- **lifted legal holds** on a conversation of the subject: the scope ref becomes the hash
  (lifting already hashes holds on the subject and on ``user/<id>``);
- **search segments** of the subject's own scopes once no memory is left in them (the
  subject deleted its memories or conversation before the erasure, so no pointer leads the
  erasure to them): their rows, objects and every object version under the scopes'
  ``@search/`` directories go (``drop_search``, before the receipt).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from sqlalchemy import Text, cast, delete, func, or_, select
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.base import utcnow
from ..db.models import (
    ApiKey,
    Conversation,
    GcCandidate,
    Job,
    LegalHold,
)
from ..identity import CALLERS
from ..jobs.service import JobContext
from ..plane.data_plane import Target
from ..search.drop import drop_empty_scopes

SCRUBBED = "details removed at a data subject's erasure"
CLEANUP_KEPT = ("older_than_days", "dry_run", "scope")


def needles(user_id: str, conversations: Iterable[str]) -> set[str]:
    """The forms in which the subject's names appear in stored text: raw, percent-encoded
    (object paths) and JSON-escaped (a JSON column read as text)."""
    found: set[str] = set()
    for name in (user_id, *conversations):
        for form in (name, quote(name, safe="")):
            found |= {form, json.dumps(form)[1:-1]}
    return {n for n in found if n}


def _names(value: str, names: set[str]) -> bool:
    return any(n in value for n in names)


def _rewrite(value: Any, names: set[str], hashed: str) -> Any:
    """``value`` with each string that is a name replaced by the hash, each string holding
    one replaced by the scrubbed note (an error message under ``error`` keeps its code)."""
    if isinstance(value, dict):
        return {k: (_error(v, names) if k == "error" and isinstance(v, str)
                    else _rewrite(v, names, hashed)) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, names, hashed) for v in value]
    if isinstance(value, str):
        if value in names:
            return hashed
        return SCRUBBED if _names(value, names) else value
    return value


def _error(message: str | None, names: set[str]) -> str | None:
    """An error message that names the subject keeps only its leading code."""
    if message is None or not _names(message, names):
        return message
    code = message.split(":", 1)[0].strip()
    if not code or len(code) > 64 or not code.replace("_", "").isalnum() or _names(code, names):
        code = "error"
    return f"{code}: {SCRUBBED}"


def scrub_jobs(session: Session, tenant_id: uuid.UUID, user_id: str,
               conversations: Sequence[str], hashed: str, this_job: uuid.UUID) -> int:
    """In the caller's write transaction: every other job of the tenant that names the
    subject, whatever its kind and state, keeps only the hash. How many jobs changed."""
    names = needles(user_id, conversations)
    text_of = (cast(Job.params, Text), cast(Job.result, Text), cast(Job.progress, Text),
               Job.error)
    matches = [column.contains(name, autoescape=True) for column in text_of for name in names]
    changed = 0
    for job in session.scalars(select(Job).where(
            Job.tenant_id == tenant_id, Job.id != this_job,
            # another erasure of the subject still to run hashes its own row when it ends
            ~((Job.kind == "erase") & Job.state.in_(("queued", "running"))),
            or_(Job.subject == user_id, *matches))):
        if job.subject == user_id:
            job.subject = hashed
        params = dict(job.params or {})
        if job.kind == "cleanup" and (params.get("scope_ref") in names
                                      or any(_names(k, names)
                                             for k in params.get("exclude_keys") or ())):
            # What the cleanup's own completion keeps; without "before" it finishes as done.
            params = {k: params.get(k) for k in CLEANUP_KEPT}
        job.params = _rewrite(params, names, hashed)
        job.result = _rewrite(job.result, names, hashed) if job.result is not None else None
        job.progress = _rewrite(dict(job.progress or {}), names, hashed)
        job.error = _error(job.error, names)
        changed += 1
    return changed


def retire_agent_keys(ctx: JobContext, user_id: str, conversations: Sequence[str],
                      hashed: str) -> list[str]:
    """In the caller's write transaction: grants of the subject's scopes name the hash; a
    key with no other grant is revoked (audited), as is the subject's own key (role user).
    The digests of the keys revoked or changed, to drop from the caller cache once
    committed."""
    own = {("user", user_id), *(("conversation", ref) for ref in conversations)}
    revoked: list[str] = []
    now = utcnow()
    for key in ctx.session.scalars(select(ApiKey).where(ApiKey.tenant_id == ctx.tenant_id,
                                                        ApiKey.scopes.is_not(None))):
        grants = list(key.scopes or [])
        mine = [(g.get("scope"), g.get("scope_ref")) in own for g in grants]
        if not any(mine):
            continue
        key.scopes = [{**g, "scope_ref": hashed} if is_mine else g
                      for g, is_mine in zip(grants, mine, strict=True)]
        revoked.append(key.key_sha256)  # its access list changed: cached, it is stale
        if all(mine) and key.revoked_at is None:
            key.revoked_at = now
            audit.record(ctx.session, ctx.actor, "key_revoke",
                         detail=f"job {ctx.job_id}: key {key.id} revoked: every scope it "
                                "granted belonged to an erased data subject")
    # The subject's own keys (role user) name the hash and are revoked.
    for key in ctx.session.scalars(select(ApiKey).where(ApiKey.tenant_id == ctx.tenant_id,
                                                        ApiKey.user_id == user_id)):
        key.user_id = hashed
        if key.revoked_at is None:
            key.revoked_at = now
            revoked.append(key.key_sha256)
            audit.record(ctx.session, ctx.actor, "key_revoke",
                         detail=f"job {ctx.job_id}: key {key.id} revoked: the data subject's "
                                "own key, at the subject's erasure")
    return revoked


def forget_revoked(digests: Iterable[str]) -> None:
    """After the commit: a revoked key stops answering at once (not when its cache entry
    expires)."""
    for digest in digests:
        CALLERS.forget(digest)


def forget_gc_dirs(session: Session, config_id: uuid.UUID, pointers: Iterable[Any]) -> None:
    """In the caller's write transaction: GC tombstones under the key directories of these
    deleted pointers (memories by key: a directory each) go; their paths name the key."""
    dirs = sorted({p.storage_path.rsplit("/", 1)[0] + "/" for p in pointers
                   if p.key is not None})
    for chunk in range(0, len(dirs), 200):
        session.execute(delete(GcCandidate).where(
            GcCandidate.storage_config_id == config_id,
            or_(*(func.substr(GcCandidate.path, 1, len(d)) == d
                  for d in dirs[chunk:chunk + 200])))
            .execution_options(synchronize_session=False))


def forget_gc_prefixes(session: Session, targets: Sequence[Target], user_id: str,
                       conversations: Sequence[str]) -> None:
    """In the caller's write transaction: GC tombstones under the subject's prefixes and
    under its conversations' directories go."""
    dirs = [f"{kind}/{scope}/{quote(ref, safe='')}/" for scope, ref in (
        ("user", user_id), *(("conversation", c) for c in conversations))
        for kind in ("memories", "events")]
    for target in targets:
        prefixes = [target.path(d) for d in dirs]
        session.execute(delete(GcCandidate).where(
            GcCandidate.storage_config_id == target.config_id,
            or_(*(func.substr(GcCandidate.path, 1, len(p)) == p for p in prefixes)))
            .execution_options(synchronize_session=False))


def hash_lifted_holds(session: Session, tenant_id: uuid.UUID, conversations: Sequence[str],
                      hashed: str) -> None:
    """In the caller's write transaction: lifted holds on the subject's conversations keep
    the hash, not the conversation's id."""
    if not conversations:
        return
    for hold in session.scalars(select(LegalHold).where(
            LegalHold.tenant_id == tenant_id, LegalHold.lifted_at.is_not(None),
            LegalHold.scope_type == "conversation",
            LegalHold.scope_ref.in_(list(conversations)))):
        hold.scope_ref, hold.subject_hash = None, hashed


def owned_conversations(session: Session, tenant_id: uuid.UUID, user_id: str) -> list[str]:
    return list(session.scalars(select(Conversation.conversation_id).where(
        Conversation.tenant_id == tenant_id, Conversation.subject_user_id == user_id)))


def drop_search(ctx: JobContext, user_id: str, targets: Sequence[Target]) -> int:
    """Drop the search index of the subject's own scopes (``user/<id>`` and its
    conversations) that no memory is left in; recorded in the job's progress."""
    scopes = [("user", user_id)] + [("conversation", ref) for ref in
                                    owned_conversations(ctx.session, ctx.tenant_id, user_id)]
    dropped = drop_empty_scopes(ctx.session, targets, ctx.tenant_id, scopes)
    ctx.commit_progress(search_dropped=True, search_segments_dropped=dropped)
    return dropped
