"""Tenant KEKs in AWS KMS (moto in server mode): wrap, unwrap, rotate to another KMS key."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import KekVersion, SubjectKey
from control_plane.errors import HashMismatch
from control_plane.identity import Actor
from control_plane.keys.rotation import rotate_kek
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.emulators import MotoServer
from tests.support.kms import kms_settings, new_kms_key


def test_kms_wraps_subject_keys_and_rotation_moves_to_another_kms_key(
        moto_server: MotoServer, tmp_path: Path) -> None:
    first = new_kms_key(moto_server, "memplane test KEK")
    second = new_kms_key(moto_server, "memplane test KEK 2")
    # The operator lets tenants move to the second key.
    runtime = Runtime(kms_settings("sqlite", tmp_path, moto_server, first, [first, second]))
    runtime.migrate()
    try:
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "kms tenant")
        actor = Actor(tenant.id, "api", "test")
        address = MemoryAddress.parse(Scope.user, "u1", "k")
        ring = runtime.plane.keys
        assert ring is not None

        def get() -> object:
            ring.cache.forget([k.id for k in rows()])  # force an unwrap through KMS
            with runtime.sessions() as session:
                return memories.get_value(session, runtime.plane, actor, address).value

        def rows() -> list[SubjectKey]:
            with runtime.sessions() as session:
                return list(session.scalars(select(SubjectKey)
                                            .where(SubjectKey.tenant_id == tenant.id)))

        with runtime.sessions() as session:
            memories.set_value(session, runtime.plane, actor, address, "via kms", MemoryMeta())
        assert get() == "via kms"
        [row] = rows()
        assert row.wrapped_key is not None
        # The wrapped key is a KMS ciphertext blob: KMS itself unwraps it with the context.
        assert len(row.wrapped_key) > 32

        with runtime.sessions() as session:
            report = rotate_kek(session, ring, actor, key_ref=second)
            versions = list(session.scalars(select(KekVersion)
                                            .where(KekVersion.tenant_id == tenant.id)
                                            .order_by(KekVersion.version)))
        assert (report.from_versions, report.to_version, report.rewrapped) == ([1], 2, 1)
        assert [(v.provider, v.key_ref) for v in versions] == [
            ("aws-kms", first), ("aws-kms", second)]
        assert get() == "via kms"

        # A wrapped key moved onto another row does not unwrap (the KMS encryption context
        # binds it to its row): the read is refused, not garbage.
        with runtime.sessions() as session:
            memories.set_value(session, runtime.plane, actor,
                               MemoryAddress.parse(Scope.user, "u2", "k"), "other",
                               MemoryMeta())
            keys_by_ref = {k.scope_ref: k for k in session.scalars(
                select(SubjectKey).where(SubjectKey.tenant_id == tenant.id))}
            keys_by_ref["u2"].wrapped_key = keys_by_ref["u1"].wrapped_key
            session.commit()
        ring.cache.forget([k.id for k in rows()])
        with runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
            memories.get_value(session, runtime.plane, actor,
                               MemoryAddress.parse(Scope.user, "u2", "k"))
        assert "does not unwrap with its KEK" in caught.value.detail
    finally:
        runtime.close()
