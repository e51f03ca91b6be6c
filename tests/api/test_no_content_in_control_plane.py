"""I7: memory values live only in the bucket; the control plane holds metadata."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import inspect, text

from tests.support.service import Tenant


def _database_text(tenant: Tenant) -> str:
    engine = tenant.stack.engine
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        assert database
        files = [Path(database), Path(f"{database}-wal")]
        return "".join(f.read_bytes().decode("latin-1") for f in files if f.exists())
    chunks = []
    with engine.connect() as conn:
        for table in inspect(conn).get_table_names():
            rows = conn.execute(text(f'SELECT row_to_json(t)::text FROM "{table}" t'))
            chunks.extend(row[0] for row in rows)
    return "\n".join(chunks)


def test_marker_value_is_only_in_the_bucket(tenant: Tenant) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="note", value={"text": marker})
        client.memory.append(scope="user", scope_ref="u1", key="log", value=marker)
        client.memory.set(scope="agent", scope_ref="a1", key="plan", value=[marker, marker])
        assert client.memory.get(scope="user", scope_ref="u1", key="note").value == {
            "text": marker}
        assert client.memory.get(scope="user", scope_ref="u1", key="log").value == [marker]

    assert marker not in _database_text(tenant)
    # Encryption is on by default: the marker is in no file of the bucket either — not in
    # the objects, and not in anything else under the data dir (key ring, temp files).
    assert len(tenant.objects()) == 3
    data_dir = tenant.stack.settings.data_dir
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert [p for p in files if marker.encode() in _bytes_of(p)] == []


def _bytes_of(path: Path) -> bytes:
    """The file's bytes; none if it went between the listing and the read — the temporary
    file of a put in flight (the shared server's sealer writes audit checkpoints meanwhile),
    renamed into place or removed."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
