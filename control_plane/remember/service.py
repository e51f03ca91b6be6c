"""Remember: extract facts from messages, reconcile them with what is stored about the data
subject, write each decision as an ordinary memory write.

Reconciliation, fact by fact in message order, against the memory at the fact's key in the
target scope (read through the memories API, so verified and audited as a read):

  - nothing stored, a statement      -> ADD
  - the same value (case and spacing aside) -> NONE ("already known")
  - another value                    -> UPDATE; the old value goes first in the new value's
                                        ``previous`` list (the last ten are kept)
  - a retraction of a stored fact    -> DELETE; of nothing stored -> NONE. A retraction
                                        that names a stored value rather than the key
                                        ("I don't use my iPad Air anymore") deletes the one
                                        remembered memory holding that value (``_retract``)
  - a statement the DLP detector flags -> NONE ``sensitive:<kind>``, nothing written, no
                                        value in the answer

Every write goes through ``memories.service`` (encrypted into the tenant's bucket, one audit
row, the subject's key, so export and erasure of ``user_id`` cover it), with ``source``
``remember`` and tags naming the extractor, the model, the conversation and the messages.
The stored value is ``{"content", "value", "previous", "provenance"}``; nothing of it goes
to the control plane (the key is the fact's kind and a slug of its subject).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress, Scope
from ..audit import service as audit
from ..audit.service import audited
from ..db.engine import begin_write
from ..errors import InvalidInput, NotFound
from ..identity import EVERYTHING, Access, Actor
from ..memories import service as memories
from ..memories.schemas import MemoryMeta
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..summarizers import Running
from . import model, rules
from .rules import Fact
from .schemas import Decision, RememberIn, RememberOut
from .sensitive import sensitive_kind

SOURCE = "remember"
KEEP_PREVIOUS = 10
_TAG_CHARS = 64


@dataclass
class Run:
    """One remember call: where it writes, for whom, and what it has decided so far."""

    address: MemoryAddress  # the target scope (no key)
    user_id: str
    agent_id: str | None
    conversation_id: str | None
    extractor: str
    model: str | None
    dry_run: bool
    known: dict[str, Any] = field(default_factory=dict)  # key -> stored value (None: absent)


def _normal(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip().strip(".!").casefold()


def _stored_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(value.get("value"), str):
        return str(value["value"])
    return value if isinstance(value, str) else str(value)


def target_of(body: RememberIn, access: Access) -> MemoryAddress:
    """The scope the facts go to: the user's own by default."""
    if body.scope is Scope.user:
        ref = body.user_id
    elif body.scope is Scope.agent:
        ref = body.agent_id or access.agent_id or ""
        if not ref:
            raise InvalidInput("scope 'agent' needs agent_id (or an agent key)")
    else:
        if body.scope_ref is None:
            raise InvalidInput(f"scope {body.scope.value!r} needs scope_ref")
        ref = body.scope_ref
    return MemoryAddress.parse(body.scope, ref)


def remember(session: Session, plane: DataPlane, runtime_or_settings: Running | Settings,
             actor: Actor, body: RememberIn, *, access: Access = EVERYTHING,
             seqs: Sequence[int] | None = None) -> RememberOut:
    """Extract, reconcile and (unless ``dry_run``) write. ``seqs`` are the messages'
    numbers in their conversation (default 1, 2, …)."""
    with audited(session, actor, "remember", detail=body.scope.value,
                 private=(body.user_id, body.scope_ref, body.conversation_id)):
        address = target_of(body, access)
        memories.ensure_visible(session, actor, access, address, "remember")
        numbers = list(seqs) if seqs is not None else list(range(1, len(body.messages) + 1))
        messages: list[tuple[int, str, str]] = [
            (n, m.role, m.content) for n, m in zip(numbers, body.messages, strict=True)]
        run = Run(address, body.user_id, body.agent_id or access.agent_id, body.conversation_id,
                  rules.EXTRACTOR, None, body.dry_run)
        decisions = _decide(session, plane, runtime_or_settings, actor, access, run, messages)
        counts = {e: sum(d.event == e for d in decisions)
                  for e in ("ADD", "UPDATE", "DELETE", "NONE")}
        begin_write(session)
        audit.record(session, actor, "remember", detail=(
            f"{address.scope}: {run.extractor}{' dry run' if run.dry_run else ''} "
            + " ".join(f"{e.lower()}={n}" for e, n in counts.items())))
        session.commit()
        return RememberOut(decisions=decisions, extractor=run.extractor, model=run.model,
                           dry_run=run.dry_run)


def _decide(session: Session, plane: DataPlane, runtime_or_settings: Running | Settings,
            actor: Actor, access: Access, run: Run,
            messages: list[tuple[int, str, str]]) -> list[Decision]:
    endpoint = model.endpoint_for(session, runtime_or_settings, actor.tenant_id,
                                  run.address.scope)
    note = ""
    if endpoint is not None:
        stored = _stored(session, plane, actor, access, run)
        try:
            found = model.ask(endpoint, stored, messages)
        except model.ModelUnusable as exc:
            note = f" (the model failed: {exc.code}; built-in extractor used)"
        else:
            run.extractor, run.model = model.EXTRACTOR, endpoint.model
            return [_reconcile(session, plane, actor, access, run, fact,
                               "" if sensitive_kind(reason) else reason,
                               sensitive_kind(f"{fact.key} {fact.value or ''}"))
                    for fact, reason in found]
    decisions = []
    for sentence, fact in _last_per_key(rules.extract(messages)):
        decision = _reconcile(session, plane, actor, access, run, fact, "",
                              sensitive_kind(sentence))
        decisions.append(decision.model_copy(update={"reason": decision.reason + note}))
    return decisions


def _last_per_key(found: list[tuple[str, Fact | None]]) -> list[tuple[str, Fact]]:
    """The last statement of each fact (its key) in the messages, with the seqs of all:
    "bullet points", then "numbered lists" is one fact, numbered lists."""
    facts = [(sentence, fact) for sentence, fact in found if fact is not None]
    seqs: dict[str, set[int]] = {}
    for _, fact in facts:
        seqs.setdefault(fact.key, set()).update(fact.seqs)
    last = {fact.key: index for index, (_, fact) in enumerate(facts)}
    return [(sentence, replace(fact, seqs=tuple(sorted(seqs[fact.key]))))
            for index, (sentence, fact) in enumerate(facts) if last[fact.key] == index]


def _stored(session: Session, plane: DataPlane, actor: Actor, access: Access,
            run: Run) -> dict[str, str]:
    """What remember stored before in the target scope about the subject (for the model)."""
    pointers, _ = memories.list_pointers(
        session, actor, scope=run.address.scope, scope_ref=run.address.scope_ref,
        user_id=run.user_id, memory_type=None, sync_status=None, cursor=None, limit=100,
        access=access, tag=SOURCE)
    keys = [p.key for p in pointers if p.key is not None]
    keys += [k for k in run.known if k not in keys]  # written by this call (or dry run)
    stored: dict[str, str] = {}
    for key in keys:
        text = _stored_text(_current(session, plane, actor, access, run, key))
        if text is not None:
            stored[key] = text
    return stored


def _at(run: Run, key: str) -> MemoryAddress:
    return MemoryAddress.parse(Scope(run.address.scope), run.address.scope_ref, key)


def _current(session: Session, plane: DataPlane, actor: Actor, access: Access, run: Run,
             key: str) -> Any:
    if key not in run.known:
        try:
            run.known[key] = memories.get_value(session, plane, actor,
                                                _at(run, key), access=access).value
        except NotFound:
            run.known[key] = None
    return run.known[key]


def _reconcile(session: Session, plane: DataPlane, actor: Actor, access: Access, run: Run,
               fact: Fact, reason: str, sensitive: str | None) -> Decision:
    if sensitive is not None:
        return Decision(event="NONE", key=fact.key, value=None, reason=f"sensitive:{sensitive}")
    if fact.value is None:
        return _retract(session, plane, actor, access, run, fact, reason)
    stored = _current(session, plane, actor, access, run, fact.key)
    before = _stored_text(stored)
    if before is not None and _normal(before) == _normal(fact.value):
        return Decision(event="NONE", key=fact.key, value=fact.value,
                        reason=reason or "already known")
    value = _value(run, fact, stored, before)
    if not run.dry_run:
        meta = MemoryMeta(memory_type=fact.memory_type, tags=_tags(run, fact),
                          user_id=run.user_id, agent_id=run.agent_id)
        memories.set_value(session, plane, actor, _at(run, fact.key), value,
                           meta.model_copy(update={"source": SOURCE}), access=access)
    run.known[fact.key] = value
    if before is None:
        return Decision(event="ADD", key=fact.key, value=fact.value, reason=reason or "new fact")
    return Decision(event="UPDATE", key=fact.key, value=fact.value, previous=before,
                    reason=reason or "changed")


def _retract(session: Session, plane: DataPlane, actor: Actor, access: Access, run: Run,
             fact: Fact, reason: str) -> Decision:
    """DELETE the memory a retraction takes back: the one at its key — for a key of one
    value (``team``, ``employer``) only if it holds the value the retraction names — else
    the one remembered memory whose value it names ("I don't use my iPad Air anymore"
    deletes ``about.tablet`` = "iPad Air"). Nothing, or several, named: NONE."""
    key = fact.key
    before = _stored_text(_current(session, plane, actor, access, run, key))
    if before is not None and "." not in key and fact.names is not None \
            and not _names(fact.names, before):
        before = None
    if before is None and fact.names is not None:
        holders = [k for k, text in _stored(session, plane, actor, access, run).items()
                   if _names(fact.names, text)]
        if len(holders) > 1:
            return Decision(event="NONE", key=key, value=None,
                            reason=reason or "several memories hold what it names")
        if holders:
            key = holders[0]
            before = _stored_text(_current(session, plane, actor, access, run, key))
    if before is None:
        return Decision(event="NONE", key=key, value=None,
                        reason=reason or "nothing stored to retract")
    if not run.dry_run:
        memories.delete_value(session, plane, actor, _at(run, key), access=access)
    run.known[key] = None
    return Decision(event="DELETE", key=key, value=None, previous=before,
                    reason=reason or "retracted")


def _names(named: str, stored: str) -> bool:
    """Whether a retraction's words name a stored value: the same, or the first words of
    it ("Kubernetes" names "Kubernetes 1.29 on Google Cloud"; "Go" does not name
    "Google Docs")."""
    named, stored = _normal(named), _normal(stored)
    return bool(named) and re.match(rf"{re.escape(named)}(?![\w.-])", stored) is not None


def _value(run: Run, fact: Fact, stored: Any, before: str | None) -> dict[str, Any]:
    previous: list[Any] = []
    if isinstance(stored, dict) and isinstance(stored.get("previous"), list):
        previous = list(stored["previous"])
    if before is not None:
        previous.insert(0, {"value": before,
                            "replaced_at": datetime.now(UTC).isoformat(timespec="seconds")})
    return {"content": f"{fact.label}: {fact.value}", "value": fact.value,
            "previous": previous[:KEEP_PREVIOUS],
            "provenance": {"conversation_id": run.conversation_id,
                           "message_seqs": list(fact.seqs), "extractor": run.extractor,
                           "model": run.model}}


def _tags(run: Run, fact: Fact) -> list[str]:
    tags = [SOURCE, f"extractor:{run.extractor}",
            f"seqs:{','.join(str(s) for s in fact.seqs)}"]
    if run.model is not None:
        tags.append(f"model:{run.model}")
    if run.conversation_id is not None:
        tags.append(f"conversation:{run.conversation_id}")
    return [t for t in tags if len(t) <= _TAG_CHARS]
