"""Issue 10, point 7: keys, scope refs and user ids are NFC-normalised where they enter, so
one person or one key is one identifier whichever Unicode form the caller typed it in —
erasing "josé" (NFC, precomposed é) also erases what was written as "josé" (NFD, e + U+0301).
"""

from __future__ import annotations

import unicodedata
import uuid

import pytest
from sqlalchemy import text

import memplane
from control_plane.addresses import MemoryAddress, Scope
from tests.support.service import Tenant


def _forms(name: str) -> tuple[str, str]:
    nfc, nfd = unicodedata.normalize("NFC", name), unicodedata.normalize("NFD", name)
    assert nfc != nfd
    return nfc, nfd


def test_address_parts_are_stored_in_nfc() -> None:
    nfc, nfd = _forms("josé")
    key_nfc, key_nfd = _forms("café")
    address = MemoryAddress.parse(Scope.user, nfd, key_nfd)
    assert (address.scope_ref, address.key) == (nfc, key_nfc)
    assert address == MemoryAddress.parse(Scope.user, nfc, key_nfc)


def test_erasing_the_nfc_form_erases_what_was_written_in_nfd(tenant: Tenant) -> None:
    nfc, nfd = _forms(f"josé-{uuid.uuid4().hex[:8]}")
    key_nfc, key_nfd = _forms("crème-brûlée")
    officer_key = tenant.key("compliance")
    with tenant.client() as client, tenant.stack.client(officer_key) as officer:
        mine = client.memory.set(scope="user", scope_ref=nfd, key=key_nfd, value={"v": 1})
        tagged = client.memory.set(scope="team", scope_ref="T1", key=f"note-{nfc}",
                                   value={"v": 2}, user_id=nfd)
        # One identifier whichever form the caller uses: the NFC key reads the NFD write,
        # and the stored pointer carries the NFC forms.
        assert client.memory.get(scope="user", scope_ref=nfc, key=key_nfc).value == {"v": 1}
        assert (mine.scope_ref, mine.key, mine.user_id) == (nfc, key_nfc, nfc)
        assert tagged.user_id == nfc
        assert {p.id for p in client.memory.list_pointers(user_id=nfd).items} == {
            mine.id, tagged.id}

        erase = officer.jobs.wait(officer.memory.erase_user(nfc).id, timeout=120)
        assert erase.state == "completed", erase.error
        assert erase.result["counts"]["pointers"] == 2
        assert client.memory.list_pointers(user_id=nfc).items == []
        with pytest.raises(memplane.NotFound):
            client.memory.get(scope="user", scope_ref=nfd, key=key_nfd)

    with tenant.stack.engine.connect() as conn:
        left = conn.execute(text(
            "SELECT count(*) FROM memory_pointers WHERE subject_user_id IN (:a, :b) "
            "OR scope_ref IN (:a, :b)"), {"a": nfc, "b": nfd}).scalar()
    assert left == 0


def test_erasing_the_nfd_form_erases_what_was_written_in_nfc(tenant: Tenant) -> None:
    nfc, nfd = _forms(f"zoë-{uuid.uuid4().hex[:8]}")
    officer_key = tenant.key("compliance")
    with tenant.client() as client, tenant.stack.client(officer_key) as officer:
        client.memory.set(scope="user", scope_ref=nfc, key="k", value=1)
        client.memory.set(scope="agent", scope_ref="bot", key=f"k-{nfc}", value=2, user_id=nfc)
        erase = officer.jobs.wait(officer.memory.erase_user(nfd).id, timeout=120)
        assert erase.state == "completed", erase.error
        assert erase.result["counts"]["pointers"] == 2
        assert client.memory.list_pointers(user_id=nfc).items == []
