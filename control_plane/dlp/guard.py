"""The one screen every write path calls before it serialises a value (docs/dlp.md).

``screen`` applies the tenant's policy to a value and its tags:

- ``refuse``: raises ``SensitiveData`` (422 ``sensitive_data``), whose sentence names the
  kinds and where they are, never the value; nothing is written;
- ``redact``: each detected span becomes ``[redacted:<kind>]``;
- ``flag``: the tags gain ``sensitive:<kind>``;
- ``off``: nothing is scanned.

A value the ``remember`` extractor produced (``extracted=True``) is screened for every kind
and refused whatever the policy: an extracted memory never stores a detected value.

The wrappers (``screen_memory``, ``screen_fields``) are the hooks of the write paths: one
call each, returning what the path stores instead of what it was sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.orm import Session

from ..errors import InvalidInput
from ..identity import Actor
from .detect import KINDS, ValueFinding, find, find_in_value, kinds_of, redact, redact_value
from .policy import Policy, policy_of

MAX_TAGS = 50
MAX_TAG_CHARS = 64
NAMES = {
    "card": "a payment card number",
    "ssn": "a US social security number",
    "iban": "an IBAN",
    "private_key": "a private key",
    "cloud_key": "a cloud access key",
    "bearer_token": "a bearer token",
    "password": "a password",
}
M = TypeVar("M", bound=BaseModel)


class SensitiveData(InvalidInput):
    """A value holds what the tenant's DLP policy refuses; ``kinds`` names what (never the
    value)."""

    code = "sensitive_data"


@dataclass(frozen=True)
class Screened:
    """What a write stores: the value and tags after the policy, and the kinds found."""

    value: Any
    tags: list[str] | None
    kinds: tuple[str, ...] = ()


def _names(kinds: Sequence[str]) -> str:
    names = [NAMES[k] for k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _segment(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    if part.startswith("<key>"):
        return " (a key)"
    # A key that itself holds a detected value is never quoted.
    return f".{part}" if not find(part) and part.isprintable() and len(part) <= 64 else ".…"


def _place(what: str, path: tuple[str | int, ...]) -> str:
    return what + "".join(_segment(p) for p in path)


def refusal(found: Sequence[tuple[str, Sequence[ValueFinding]]], *,
            extracted: bool) -> SensitiveData:
    """The 422 for the findings of each named part (``(what, findings)``): the kinds and
    where they are, never the value."""
    found = [(what, fs) for what, fs in found if fs]
    kinds = kinds_of(f for _, fs in found for f in fs)
    subject = found[0][0] if len(found) == 1 else "this write"
    places: list[str] = []
    for what, fs in found:
        for f in fs:
            place = _place(what, f.path)
            if place not in places and place != subject:
                places.append(place)
    where = ""
    if places:
        more = f" and {len(places) - 5} more" if len(places) > 5 else ""
        where = f" (at {', '.join(places[:5])}{more})"
    how = ("an extracted memory never stores one" if extracted else
           "remove it (keep it in a secrets manager and store a reference), or ask an admin "
           "to set the DLP policy's mode to redact or flag (PUT /v1/dlp/policy)")
    verb = "hold" if subject == "the tags" else "holds"
    return SensitiveData(f"{subject} {verb} {_names(kinds)}{where}; {how}", kinds=kinds)


def flagged(tags: Sequence[str] | None, kinds: Sequence[str]) -> list[str] | None:
    """``tags`` with ``sensitive:<kind>`` for each kind, deduplicated (None stays None when
    nothing is added)."""
    if not kinds:
        return None if tags is None else list(tags)
    out = list(tags or [])
    for kind in kinds:
        tag = f"sensitive:{kind}"
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"the DLP policy tags this write {', '.join(out[MAX_TAGS:])} "
                           f"(it holds {_names(kinds)}), which takes it over {MAX_TAGS} tags; "
                           f"send fewer tags")
    return out


def _policy(session_or_policy: Session | Policy, tenant_id: uuid.UUID) -> Policy:
    if isinstance(session_or_policy, Policy):
        return session_or_policy
    return policy_of(session_or_policy, tenant_id)


def screen(session_or_policy: Session | Policy, tenant_id: uuid.UUID, value: Any,
           tags: Sequence[str] | None, *, what: str, extracted: bool = False) -> Screened:
    """Apply the tenant's DLP policy to a JSON ``value`` (every string in it, keys included)
    and its ``tags``; ``what`` names the value in a refusal ("the value", "the event body").
    Raises ``SensitiveData`` on refuse (and always for an ``extracted`` value)."""
    screened = screen_parts(session_or_policy, tenant_id, {"v": (what, value)}, tags,
                            extracted=extracted)
    return Screened(screened.value["v"], screened.tags, screened.kinds)


def screen_parts(session_or_policy: Session | Policy, tenant_id: uuid.UUID,
                 parts: dict[str, tuple[str, Any]], tags: Sequence[str] | None, *,
                 extracted: bool = False, system: bool = False) -> Screened:
    """``screen`` over several values at once, each named for a refusal: ``parts`` maps a
    field to ``(what, value)``; the answer's value maps each field to what to store.
    ``system``: the service writes it itself from content it already holds (a conversation's
    summary, the compactor's entries): refuse redacts instead, so such a job never fails
    for good on content stored before the policy changed."""
    same = {name: v for name, (_, v) in parts.items()}
    tags = None if tags is None else list(tags)
    policy = (Policy("refuse", KINDS) if extracted
              else _policy(session_or_policy, tenant_id))
    if policy.mode == "off" or not policy.kinds:
        return Screened(same, tags)
    if system and policy.mode == "refuse":
        policy = Policy("redact", policy.kinds)
    found = [(what, find_in_value(v, policy.kinds)) for what, v in parts.values()]
    found.append(("the tags", [ValueFinding(f.kind, (), f.start, f.end)
                               for t in tags or () for f in find(t, policy.kinds)]))
    if not any(fs for _, fs in found):
        return Screened(same, tags)
    kinds = tuple(kinds_of(f for _, fs in found for f in fs))
    if policy.mode == "refuse":
        raise refusal(found, extracted=extracted)
    if policy.mode == "redact":
        redacted = {name: redact_value(v, policy.kinds)[0] for name, v in same.items()}
        new_tags = None if tags is None else [
            redact(t, find(t, policy.kinds))[:MAX_TAG_CHARS] for t in tags]
        return Screened(redacted, new_tags, kinds)
    return Screened(same, flagged(tags, kinds), kinds)


def screen_memory(session: Session, actor: Actor, value: Any, meta: M, *,
                  what: str = "the value", extracted: bool = False) -> tuple[Any, M]:
    """The memory write paths' hook: the value, its title and its tags screened; the value
    and metadata to store."""
    title = getattr(meta, "title", None)
    parts: dict[str, tuple[str, Any]] = {"value": (what, value)}
    if title is not None:
        parts["title"] = ("the title", title)
    screened = screen_parts(session, actor.tenant_id, parts, getattr(meta, "tags", None),
                            extracted=extracted, system=actor.accessor_type == "system")
    if not screened.kinds:
        return value, meta
    update: dict[str, Any] = {"tags": screened.tags}
    if title is not None:
        update["title"] = screened.value["title"]
    return screened.value["value"], meta.model_copy(update=update)


def screen_fields(session: Session, actor: Actor, spec: M, fields: Sequence[str], *,
                  what: str, tags_field: str | None = None, extracted: bool = False) -> M:
    """A write body's hook: its text ``fields`` (and tags, when it has them) screened; the
    body to store. ``what`` names the body ("the entry": "the entry's summary holds …").
    Without a tags field, flag leaves the body as sent (the memory it becomes, if any, is
    tagged by ``screen_memory``)."""
    parts = {name: (f"{what}'s {name}", getattr(spec, name)) for name in fields}
    tags = getattr(spec, tags_field) if tags_field is not None else None
    screened = screen_parts(session, actor.tenant_id, parts, tags, extracted=extracted,
                            system=actor.accessor_type == "system")
    if not screened.kinds:
        return spec
    update: dict[str, Any] = dict(screened.value)
    if tags_field is not None:
        update[tags_field] = screened.tags or []
    return spec.model_copy(update=update)


def as_stored(session: Session, actor: Actor, text: str) -> str:
    """``text`` as a write under the tenant's policy stores it (redacted under redact, else
    as sent): for an answer that echoes what the caller sent."""
    policy = _policy(session, actor.tenant_id)
    if actor.accessor_type == "system" and policy.mode == "refuse":
        policy = Policy("redact", policy.kinds)
    if policy.mode != "redact" or not policy.kinds:
        return text
    return redact(text, find(text, policy.kinds))
