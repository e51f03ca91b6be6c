"""Logs in local directories for the ``--noconftest`` cases of ``audit/offline.py``: the
layout of ``tests/transparency/logs.py`` (written from ``control_plane.tlog`` alone), read
straight with ``offline.verify`` under short bucket names, so every sentence is known exactly,
and the move records the cases tamper with written field by field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane.audit import offline
from control_plane.audit.anchors import FOLDER, checkpoint_name
from tests.transparency.logs import (
    Anchor,
    Log,
    b64,
    checkpoint,
    root_anchor,
    tenant_anchor,
)
from tests.transparency.logs import three_checkpoints as three

__all__ = ["Anchor", "Log", "b64", "checkpoint", "root_anchor", "tenant_anchor", "bucket",
           "verify", "fails", "three", "record", "evidence"]


def bucket(anchor: Anchor) -> offline.Bucket:
    """The anchor's directory under the name of its last part (``root``, ``own``, …)."""
    return offline.Bucket(anchor.root.name, anchor.adapter)


def verify(log: Log, *anchors: Anchor, tenant: bool = True) -> offline.Verified:
    return offline.verify([bucket(a) for a in anchors], log.signer.verifier,
                          tenant_id=str(log.tenant_id) if tenant else None)


def fails(log: Log, *anchors: Anchor, tenant: bool = True) -> str:
    with pytest.raises(offline.Failure) as failed:
        verify(log, *anchors, tenant=tenant)
    return str(failed.value)


def evidence(log: Log, seq: int, size: int) -> dict[str, Any]:
    """A move record's ``tlog``: row ``seq`` proven in the tree of ``size`` rows."""
    return {"size": size, "seq": seq, "leaf": b64(log.leaves[seq - 1]),
            "hashes": [b64(h) for h in log.inclusion(seq, size)]}


def record(log: Log, into: Anchor, leaving: Anchor, to: Anchor, seq: int,
           size: int | None = None, **changes: Any) -> dict[str, Any]:
    """The signed move record of row ``seq`` (the anchor leaving ``leaving`` for ``to``),
    proven in the tree of ``size`` rows (``seq`` by default), written into ``into``;
    ``changes`` replace fields before it is signed. Returns the body as signed."""
    body: dict[str, Any] = {
        "tenant_id": str(log.tenant_id), "seq": seq, "row_hash": "0" * 64,
        "prev_seq": seq - 1, "created_at": "2025-01-01T00:00:00+00:00",
        "anchor": leaving.describe(), "moved_to": to.describe(),
        "tlog": evidence(log, seq, size or seq)}
    body.update(changes)
    data = log.sign_json(body)
    into.put((*FOLDER, checkpoint_name(seq, moved=True)), data)
    return dict(json.loads(data))

