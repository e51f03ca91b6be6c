"""Logs for the witness tests: a history of leaves signed by a log key, and its fork (the
same key, a shared prefix, then other leaves)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.tlog import merkle, note
from control_plane.tlog.witness import request_body

ORIGIN = "memplane/audit/7d4f0c1e-5b7a-4a44-9d0e-3c1f2b6a9e01"


def reader(leaves: Sequence[bytes]) -> merkle.Reader:
    def read(nodes: Sequence[merkle.Node]) -> list[bytes]:
        return [merkle.root_of_leaves(leaves[i << level:(i + 1) << level])
                for level, i in nodes]
    return read


@dataclass
class Log:
    signer: note.Signer
    leaves: list[bytes]
    origin: str = ORIGIN
    extra_signers: tuple[note.Signer, ...] = field(default=())

    @property
    def vkey(self) -> str:
        return self.signer.verifier.text()

    def root(self, size: int) -> bytes:
        return merkle.root_of_leaves(self.leaves[:size])

    def checkpoint(self, size: int) -> str:
        text = note.Checkpoint(self.origin, size, self.root(size)).text()
        return note.sign(text, self.signer, *self.extra_signers)

    def proof(self, old: int, new: int) -> list[bytes]:
        return merkle.consistency_proof(old, new, reader(self.leaves)) if old else []

    def request(self, old: int, new: int) -> bytes:
        return request_body(old, self.proof(old, new), self.checkpoint(new))

    def fork(self, at: int, tag: str = "fork") -> Log:
        """The same key and the first ``at`` leaves, then other leaves."""
        other = [*self.leaves[:at], *(f"{tag} row {i}".encode()
                                      for i in range(at, len(self.leaves)))]
        return Log(self.signer, other, self.origin)


def new_log(rows: int = 12, name: str = "memplane", origin: str = ORIGIN) -> Log:
    signer = note.Signer(name, Ed25519PrivateKey.generate())
    return Log(signer, [f'{{"seq":{i + 1}}}'.encode() for i in range(rows)], origin)
