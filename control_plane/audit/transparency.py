"""The audit log as a transparency log: its signed checkpoints, its verifier key and its
proofs, as the ``/v1/audit/checkpoint``, ``/verifier-key`` and ``/proof/*`` routes serve them.

A tenant's log is named by its origin line, ``<MEMPLANE_AUDIT_LOG_NAME>/audit/<tenant id>``
(``memplane/audit/<tenant id>`` by default), unique per tenant and deployment. A checkpoint
is a C2SP signed note (https://c2sp.org/tlog-checkpoint)::

    memplane/audit/0b6c…
    1042
    <base64 root hash>

    — memplane <base64(4-byte key id ‖ Ed25519 signature)>

signed by the receipt and audit key (``control_plane/signing.py``) under the key name
``MEMPLANE_AUDIT_LOG_NAME``; its verifier key is ``<name>+<hex key id>+<base64(0x01 ‖ public
key)>``. Proofs are RFC 9162's (``tree.py``), each hash base64.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from ..errors import Conflict, InvalidInput
from ..identity import Actor
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..tlog import merkle
from . import tree
from .notes import encoded, signed_checkpoint, signer
from .service import audited, commit_reads, seal


class TreeDamaged(Conflict):
    code = "audit_tree_damaged"


@contextmanager
def _proving() -> Iterator[None]:
    """An impossible size or position is the caller's mistake: a 422 with the sentence. Tiles
    that do not hold what the tree's size says were altered in the database: a 409."""
    try:
        yield
    except merkle.ProofError as exc:
        raise InvalidInput(str(exc)) from exc
    except tree.TreeError as exc:
        raise TreeDamaged(f"the audit log's stored tree is damaged ({exc}); it was altered in "
                          "the database") from exc


def checkpoint_as(session: Session, plane: DataPlane, settings: Settings, actor: Actor) -> str:
    """The signed checkpoint of the tenant's tree now: every row committed before the call is
    sealed into it first."""
    with audited(session, actor, "audit_checkpoint"), _proving():
        session.rollback()
        seal(session, actor.tenant_id)
        size, root = tree.head(session, actor.tenant_id)
        session.rollback()
        text = signed_checkpoint(settings, actor.tenant_id, size, root)
    commit_reads(session, plane, actor, [("audit_checkpoint", None, f"tree size {size}")])
    return text


def verifier_key_as(session: Session, plane: DataPlane, settings: Settings,
                    actor: Actor) -> str:
    with audited(session, actor, "audit_verifier_key"):
        key = signer(settings).verifier.text()
    commit_reads(session, plane, actor, [("audit_verifier_key", None, key.split("+")[1])])
    return key


def inclusion_as(session: Session, plane: DataPlane, actor: Actor, seq: int,
                 tree_size: int) -> dict[str, Any]:
    detail = f"seq {seq} in tree size {tree_size}"
    with audited(session, actor, "audit_inclusion_proof", detail=detail), _proving():
        hashes = tree.inclusion(session, actor.tenant_id, seq, tree_size)
        session.rollback()
    commit_reads(session, plane, actor, [("audit_inclusion_proof", None, detail)])
    return {"leaf_index": seq - 1, "tree_size": tree_size, "hashes": encoded(hashes)}


def consistency_as(session: Session, plane: DataPlane, actor: Actor, first: int,
                   second: int) -> dict[str, Any]:
    detail = f"tree size {first} to {second}"
    with audited(session, actor, "audit_consistency_proof", detail=detail), _proving():
        hashes = tree.consistency(session, actor.tenant_id, first, second)
        session.rollback()
    commit_reads(session, plane, actor, [("audit_consistency_proof", None, detail)])
    return {"first": first, "second": second, "hashes": encoded(hashes)}
