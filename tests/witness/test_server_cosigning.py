"""The server sends each tlog checkpoint it writes to the tenant's witnesses and stores the
cosigned note beside it: a real `memplane witness serve` process, the server's own tree."""

from __future__ import annotations

from pathlib import Path

from control_plane.audit import service as audit
from control_plane.audit import tlog_anchor, tree
from control_plane.audit.notes import signer
from control_plane.tlog import note
from tests.support.service import Tenant

from .test_registry import call, start_witness


def _sealed_size(tenant: Tenant) -> int:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        audit.seal(session, tenant.id)
        return int(tree.size_of(session, tenant.id))


def _publish(tenant: Tenant) -> bool:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        return tlog_anchor.publish(session, runtime.plane, runtime.settings, tenant.id)


def test_each_checkpoint_is_cosigned_by_the_tenants_witness_and_stored_beside_it(
        tenant: Tenant, tmp_path: Path) -> None:
    log_key = signer(tenant.stack.settings).verifier
    process, vkey = start_witness(tmp_path, "witness.example.com/w1", log_key.text())
    witness = note.parse_verifier(vkey)
    folder = tenant.bucket_dir / "audit" / "checkpoints" / "tlog"
    try:
        assert call(tenant, "PUT", [{"url": process.url, "verifier_key": vkey}]).status_code == 200
        sizes = []
        for _ in range(2):
            assert call(tenant, "GET").status_code == 200  # one more audit row
            sizes.append(_sealed_size(tenant))
            assert _publish(tenant) is True
        for size in sizes:
            cosigned = (folder / "cosigned" / f"{size:020d}").read_text()
            written = (folder / "checkpoint" / f"{size:020d}").read_text()
            assert note.parse(cosigned).text == note.parse(written).text
            assert note.parse_checkpoint(note.verify(cosigned, log_key)).size == size
            assert note.verify_cosignature(cosigned, witness) > 0
        # the second was accepted with the consistency proof from the first
        assert sizes[1] > sizes[0]
        listed = call(tenant, "GET").json()["witnesses"]
        assert [(w["cosigned_size"], w["last_status"]) for w in listed] == [(sizes[1], "cosigned")]
    finally:
        process.stop()
