"""The export case's comparator: a minimal script doing the export's crypto and packing work on
the same cores, in its best simple parallel form.

Per object, in a pool of one thread per core (``cryptography``, ``hashlib`` and ISA-L release
the GIL on large buffers): read it from the bucket (the adapter's ``get``), open it (AES-GCM,
the envelope's 64 KiB chunks, under the subject key unwrapped once beforehand), check its
SHA-256 against the pointer's, deflate it (ISA-L level 1) and take its CRC-32. The main thread
writes the members into a ZIP in order (local headers, central directory, the archive's
SHA-256 counted as written) in a temporary file, then seals that file (AES-GCM, streamed) into
the bucket's directory and fsyncs it, as the export does. At most two objects per thread are
in flight (a bounded queue of futures), so its memory stays bounded too.

What it leaves out is what the export does besides: the database (pointer pages, one audit
row per item, the job's progress, the manifest's proof), the manifest itself and the checks
of a pointer changed or deleted meanwhile. The bar (``bench/bars.py``) gives memplane 0.8× of
this for those."""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from isal import isal_zlib

from control_plane.keys import subject_keys
from storage_adapters import envelope


def _member(adapter: Any, tenant_id: uuid.UUID, key: bytes,
            item: tuple[str, uuid.UUID, str]) -> tuple[int, int, bytes]:
    path, pointer_id, sha256 = item
    plain = subject_keys.open_with(tenant_id, path, pointer_id, adapter.get(path), key)
    if hashlib.sha256(plain).hexdigest() != sha256:
        raise ValueError(f"{path} does not match its SHA-256")
    packer = isal_zlib.compressobj(1, isal_zlib.DEFLATED, -15)
    return isal_zlib.crc32(plain), len(plain), packer.compress(plain) + packer.flush()


def run(adapter: Any, tenant_id: uuid.UUID, key_id: uuid.UUID, key: bytes,
        items: Sequence[tuple[str, uuid.UUID, str]], out_dir: str) -> dict[str, float]:
    """Export ``items`` (path, pointer id, SHA-256) into a sealed ZIP in ``out_dir``: the
    seconds it took and the archive's size."""
    started = time.perf_counter()
    threads = os.cpu_count() or 1
    directory: list[bytes] = []
    digest = hashlib.sha256()
    offset = 0
    with tempfile.TemporaryFile() as archive, ThreadPoolExecutor(threads) as pool:
        def write(data: bytes) -> None:
            nonlocal offset
            archive.write(data)
            digest.update(data)
            offset += len(data)

        def add(n: int, done: Future[tuple[int, int, bytes]]) -> None:
            crc, size, packed = done.result()
            name = f"items/{n}.json".encode()
            directory.append(struct.pack(
                "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(packed),
                size, len(name), 0, 0, 0, 0, 0, offset) + name)
            write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc,
                              len(packed), size, len(name), 0) + name)
            write(packed)

        flight: deque[tuple[int, Future[tuple[int, int, bytes]]]] = deque()
        for n, item in enumerate(items):
            if len(flight) >= 2 * threads:
                add(*flight.popleft())
            flight.append((n, pool.submit(_member, adapter, tenant_id, key, item)))
        while flight:
            add(*flight.popleft())
        start = offset
        for entry in directory:
            write(entry)
        write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(directory), len(directory),
                          offset - start, start, 0))
        digest.hexdigest()
        archive.seek(0)
        target = os.path.join(out_dir, f"floor-{uuid.uuid4().hex}.zip")
        with open(target, "wb") as sealed:
            envelope.seal_stream(archive, sealed, offset, key_id=key_id, subject_key=key,
                                 context=envelope.associated_data(tenant_id, target, "", None))
            sealed.flush()
            os.fsync(sealed.fileno())
    seconds = time.perf_counter() - started
    os.unlink(target)
    return {"seconds": seconds, "size": float(offset)}
