"""A tenant's audit log written into buckets as the sealer lays it out, built here from
``control_plane.tlog`` alone (no server): leaves, signed checkpoint notes, consistency proofs,
the JSON checkpoints that name each place, and move records with their inclusion proof.

Tests use it to make a good log and then tamper with the files the way an attacker with
write access to the bucket would."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.audit import offline
from control_plane.audit.anchors import FOLDER, FORMAT, Place, checkpoint_name
from control_plane.signing import SigningKey
from control_plane.tlog import merkle, note
from storage_adapters.local import LocalAdapter


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Log:
    """One tenant's log: its leaves and the key that signs it."""

    tenant_id: uuid.UUID = field(default_factory=uuid.uuid4)
    key: SigningKey = field(default_factory=lambda: SigningKey(Ed25519PrivateKey.generate()))
    name: str = "memplane"
    leaves: list[bytes] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return offline.origin_of(self.name, self.tenant_id)

    @property
    def signer(self) -> note.Signer:
        return note.Signer(self.name, self.key.private)

    @property
    def vkey(self) -> str:
        return self.signer.verifier.text()

    def append(self, operation: str = "memory_read", detail: str = "", n: int = 1) -> int:
        for _ in range(n):
            seq = len(self.leaves) + 1
            row = {"seq": seq, "accessed_at": "2025-01-01T00:00:00.000000Z",
                   "accessor_type": "api_key", "accessor_id": "k", "agent_id": None,
                   "operation": operation, "success": True, "detail": detail or f"row {seq}",
                   "pointer_id": None, "event_id": None, "request_id": None}
            self.leaves.append(json.dumps(row, sort_keys=True, separators=(",", ":")).encode())
        return len(self.leaves)

    def _read(self, nodes: Sequence[merkle.Node]) -> list[bytes]:
        return [merkle.root_of_leaves(self.leaves[i << level:(i + 1) << level])
                for level, i in nodes]

    def root(self, size: int) -> bytes:
        return merkle.root(size, self._read)

    def note(self, size: int, signer: note.Signer | None = None) -> str:
        checkpoint = note.Checkpoint(self.origin, size, self.root(size))
        return note.sign(checkpoint.text(), signer or self.signer)

    def consistency(self, first: int, second: int) -> list[bytes]:
        return merkle.consistency_proof(first, second, self._read)

    def inclusion(self, seq: int, size: int) -> list[bytes]:
        return merkle.inclusion_proof(seq - 1, size, self._read)

    def sign_json(self, body: dict[str, Any]) -> bytes:
        body = {**body, "format": FORMAT, "key_id": self.key.key_id}
        body["signature"] = self.key.sign(body)
        return json.dumps(body, sort_keys=True).encode()


@dataclass
class Anchor:
    """One place the log was anchored to: a directory, and how checkpoints describe it."""

    root: Path
    place: Place
    config_id: uuid.UUID | None

    @property
    def adapter(self) -> LocalAdapter:
        return LocalAdapter(self.root)

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def describe(self) -> dict[str, Any]:
        return self.place.describe(self.config_id)

    def put(self, parts: Sequence[str], data: bytes | str) -> None:
        target = self.path(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)


def root_anchor(tmp: Path, tenant_id: uuid.UUID) -> Anchor:
    return Anchor(tmp / "root", Place("default", None, None, f"tenants/{tenant_id}"), None)


def tenant_anchor(tmp: Path, name: str) -> Anchor:
    config_id = uuid.uuid4()
    return Anchor(tmp / name, Place("s3", name, None, "memplane"), config_id)


def checkpoint(log: Log, anchor: Anchor, size: int, previous: int | None) -> None:
    """What the sealer writes for the tree of ``size`` leaves: the note, the consistency proof
    from the previous checkpoint, and the JSON checkpoint that names the place."""
    anchor.put(offline.checkpoint_path(size), log.note(size))
    if previous:
        proof = {"first": previous, "second": size,
                 "hashes": [b64(h) for h in log.consistency(previous, size)]}
        anchor.put(offline.consistency_path(previous, size), json.dumps(proof))
    body = {"tenant_id": str(log.tenant_id), "seq": size, "row_hash": "0" * 64,
            "prev_seq": previous or 0, "created_at": "2025-01-01T00:00:00+00:00",
            "anchor": anchor.describe()}
    anchor.put((*FOLDER, checkpoint_name(size)), log.sign_json(body))


def three_checkpoints(log: Log, anchor: Anchor) -> list[int]:
    """Checkpoints at 3, 7 and 12 rows, each with its proof from the one before."""
    sizes, previous = [], None
    for n in (3, 4, 5):
        size = log.append(n=n)
        checkpoint(log, anchor, size, previous)
        sizes.append(size)
        previous = size
    return sizes


def move(log: Log, old: Anchor, new: Anchor, previous: int, *, checkpointed: bool = True
         ) -> int:
    """The anchor moves from ``old`` to ``new``: the move's row, a checkpoint of ``old`` that
    holds it, the move record proving it there, and the same checkpoint in ``new``. Returns
    the checkpoint's size. Unless ``checkpointed``, only the old-style record is written."""
    seq = log.append("audit_anchor_moved", offline.move_detail(new.place, new.config_id))
    body: dict[str, Any] = {
        "tenant_id": str(log.tenant_id), "seq": seq, "row_hash": "0" * 64,
        "prev_seq": previous, "created_at": "2025-01-01T00:00:00+00:00",
        "anchor": old.describe(), "moved_to": new.describe()}
    if checkpointed:
        checkpoint(log, old, seq, previous)
        body["tlog"] = {"size": seq, "seq": seq, "leaf": b64(log.leaves[seq - 1]),
                        "hashes": [b64(h) for h in log.inclusion(seq, seq)]}
        new.put(offline.checkpoint_path(seq), log.note(seq))
    old.put((*FOLDER, checkpoint_name(seq, moved=True)), log.sign_json(body))
    return seq
