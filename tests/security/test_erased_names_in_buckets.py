"""After an erasure no name in the tenant's local bucket, nor in ``subject_keys``, names the
erased subject: emptied directories (``memories/user/bob/diet``, ``team/T9/bobnote``,
``conversation/c-bob``) go with their last object, up to the bucket root, and the keys of
the subject's conversations are destroyed and renamed like the subject's own."""

from __future__ import annotations

import os
import uuid

from sqlalchemy import select

from control_plane.db.models import SubjectKey
from control_plane.keys import subject_keys as keys
from control_plane.keys.pseudonyms import pseudonym
from tests.support.service import Tenant


def _names(root: str) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        found += [os.path.join(rel, name) for name in (*dirnames, *filenames)]
    return found


def test_erasure_leaves_no_directory_or_key_named_after_the_subject(tenant: Tenant) -> None:
    bob = f"bob{uuid.uuid4().hex[:6]}"
    conversation = f"c-{bob}"
    officer_key = tenant.key("compliance")
    with tenant.client() as client, tenant.stack.client(officer_key) as officer:
        client.memory.set(scope="user", scope_ref=bob, key="diet", value={"v": "no fish"})
        client.memory.set(scope="team", scope_ref="T9", key=f"{bob}note", value={"v": 1},
                          user_id=bob)
        client.memory.set(scope="team", scope_ref="T9", key="roadmap", value={"v": 2})
        client.conversations.add_message(conversation, "user", "hello", user_id=bob)
        client.conversations.add_message(conversation, "assistant", "hi there")
        summary = client.jobs.wait(client.conversations.summarize(conversation).id)
        assert summary.state == "completed", summary.error
        # The search index seals a scope's segments under the scope's key: the key the
        # indexer takes for the conversation's segment.
        runtime = tenant.stack.runtime
        with runtime.sessions() as session:
            keys.key_for_write(session, runtime.plane.keys, tenant.id,
                               ("conversation", conversation))
            session.commit()
        before = _names(str(tenant.bucket_dir))
        assert any(bob in name for name in before)
        done = officer.jobs.wait(officer.memory.erase_user(bob).id, timeout=120)
        assert done.state == "completed", done.error

    root = str(tenant.stack.bucket_root)
    left = [name for name in _names(root) if bob in name]
    assert left == []
    # The bystander's object and its directories stay.
    assert any(name.endswith("roadmap") or "/roadmap/" in name
               for name in _names(str(tenant.bucket_dir)))
    with tenant.stack.engine.connect() as conn:
        refs = conn.execute(select(SubjectKey.scope_type, SubjectKey.scope_ref).where(
            SubjectKey.tenant_id == tenant.id)).all()
    assert [row for row in refs if bob in row.scope_ref] == []
    keyed = pseudonym(runtime.plane.credentials, tenant.id, bob)
    assert sorted(row.scope_type for row in refs if row.scope_ref == keyed) == [
        "conversation", "user"]
