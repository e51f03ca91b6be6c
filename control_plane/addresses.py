"""Where a memory lives: validating scopes, scope refs and keys, and confining them to paths.

Every domain that names a memory, a scope or a data subject reads these: the API schemas of
memories, holds, tenants, events and the rest take a :data:`Ref` (a user, agent or scope ref,
NFC-normalised as it enters) and a :class:`Scope`.

A key or scope ref becomes exactly one path segment (percent-encoded, ``/`` included), so
no input can climb out of ``{prefix}/memories/{scope}/{scope_ref}/`` (I5).

Keys, scope refs and user ids are NFC-normalised where they enter (:func:`nfc`): "josé"
typed with a combining accent (NFD) and with the precomposed letter (NFC) are one subject and
one key, so erasing either erases both.
"""

from __future__ import annotations

import hashlib
import unicodedata
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated
from urllib.parse import quote

from pydantic import AfterValidator, StringConstraints

from .errors import InvalidInput
from .kit import PLAIN_TEXT

# One path segment must fit every backend; file systems cap a name at 255 bytes.
MAX_KEY_CHARS = 255
MAX_SCOPE_REF_CHARS = 255
MAX_KEY_BYTES = 255
MAX_SCOPE_REF_BYTES = 255


class Scope(StrEnum):
    tenant = "tenant"
    institutional = "institutional"
    app = "app"
    team = "team"
    agent = "agent"
    user = "user"
    conversation = "conversation"
    entity = "entity"
    project = "project"

    @property
    def canonical(self) -> str:
        return "tenant" if self is Scope.institutional else self.value


# The memory types the server itself writes or defaults to (README, CLI help and the API's
# description list exactly these); any other lower-case label is accepted as well.
MEMORY_TYPES = ("fact", "preference", "conversation_history", "agent_memory", "team_context",
                "knowledge", "summary", "entry")

DEFAULT_MEMORY_TYPES = {
    "conversation": "conversation_history",
    "agent": "agent_memory",
    "team": "team_context",
    "user": "preference",
}


def nfc(value: str) -> str:
    """The canonical (NFC) form every identifier is stored and compared in."""
    return unicodedata.normalize("NFC", value)


# An id given in a request (a user, an agent, a scope ref): plain text, in its NFC form.
Ref = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=PLAIN_TEXT),
              AfterValidator(nfc)]


def validate_segment(value: str, field: str, *, max_chars: int, max_bytes: int) -> str:
    """Return the percent-encoded path segment for ``value`` or raise a clear InvalidInput."""
    if value == "":
        raise InvalidInput(f"{field} must not be empty")
    if len(value) > max_chars:
        raise InvalidInput(f"{field} must be at most {max_chars} characters")
    # ASCII has no Cf, Cs, Zl or Zp character, and its Cc ones are exactly what
    # isprintable() refuses: most keys need no per-character look-up.
    if not (value.isascii() and value.isprintable()):
        for ch in value:
            if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
                raise InvalidInput(f"{field} must not contain control or format characters "
                                   f"(found U+{ord(ch):04X})")
    if value.startswith("/"):
        raise InvalidInput(f"{field} must not start with '/' (no absolute paths)")
    if any(part in (".", "..") for part in value.split("/")):
        raise InvalidInput(f"{field} must not contain '.' or '..' path segments")
    encoded = quote(value, safe="")
    if len(encoded) > max_bytes:
        raise InvalidInput(f"{field} is too long once encoded ({len(encoded)} > {max_bytes} bytes)")
    return encoded


@dataclass(frozen=True)
class MemoryAddress:
    scope: str  # canonical scope name
    scope_ref: str
    key: str | None = None

    @classmethod
    def parse(cls, scope: Scope, scope_ref: str, key: str | None = None) -> MemoryAddress:
        canonical = scope.canonical
        scope_ref = nfc(scope_ref)
        key = nfc(key) if key is not None else None
        if canonical == "tenant" and scope_ref != "-":
            raise InvalidInput("tenant-wide memories use scope_ref '-'")
        validate_segment(scope_ref, "scope_ref", max_chars=MAX_SCOPE_REF_CHARS,
                         max_bytes=MAX_SCOPE_REF_BYTES)
        if key is not None:
            validate_segment(key, "key", max_chars=MAX_KEY_CHARS, max_bytes=MAX_KEY_BYTES)
        return cls(canonical, scope_ref, key)

    def scope_dir(self) -> str:
        return f"memories/{self.scope}/{quote(self.scope_ref, safe='')}"

    def object_path(self, version_id: str) -> str:
        assert self.key is not None
        return f"{self.scope_dir()}/{quote(self.key, safe='')}/{version_id}.json"

    @property
    def user_ref(self) -> str | None:
        """The user a ``user``-scope address belongs to (its scope ref); None elsewhere."""
        return self.scope_ref if self.scope == "user" else None

    @property
    def personal(self) -> tuple[str | None, ...]:
        """The parts that may identify a person: audit rows never hold them in clear."""
        return (None if self.scope == "tenant" else self.scope_ref, self.key)

    def describe(self) -> str:
        return f"{self.scope}/{self.scope_ref}" + (f" key={self.key}" if self.key else "")

    def digest(self, tenant_id: uuid.UUID) -> bytes:
        """A short digest naming the tenant's address in a process's caches, which keep no
        personal string: worked out once per address (a write looks up three caches)."""
        kept = self.__dict__.get("_digest")
        if kept is not None and kept[0] == tenant_id:
            return kept[1]  # type: ignore[no-any-return]
        digest = digest_of(str(tenant_id), self.scope, self.scope_ref, self.key or "")
        object.__setattr__(self, "_digest", (tenant_id, digest))
        return digest


def digest_of(*parts: str) -> bytes:
    """A short digest naming ``parts`` in the process's caches (no personal string kept)."""
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).digest()
