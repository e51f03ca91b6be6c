"""Witnesses for the ``--noconftest`` tests of ``control_plane/audit/witnesses.py``: a real
witness (``control_plane.tlog.witness.Witness``) behind a local HTTP server, stand-ins that
answer what a test says, and a clock of the test's own for the answer's deadline. The tenant
lives in ``checkpoint_world.py``'s world (an embedded SQLite file and a local bucket); its
witness rows are written straight into the table."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from sqlalchemy import select

from control_plane.audit import witnesses
from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import AuditWitness
from control_plane.tlog import note
from control_plane.tlog.witness import State, Witness, cosigner_verifier, new_key, parse_key
from tests.support.local_http import LocalHTTPServer, answer
from tests.unit.checkpoint_world import World, make_world
from tests.witness.logs import Log, new_log

COSIGNED_AT = 1_700_000_000  # the real witness's clock: its lines are the same bytes each time


def witness_world(data_dir: Path, **overrides: Any) -> Iterator[World]:
    """A world whose guard lets the server reach 127.0.0.1 (the test witnesses)."""
    yield from make_world(data_dir, **{"allowed_endpoints": ["127.0.0.1/32"], **overrides})


def a_vkey(name: str = "w.example") -> str:
    """A new witness's cosignature verifier key."""
    return cosigner_verifier(parse_key(new_key(name))).text()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recording(LocalHTTPServer):
    """A witness server that keeps every request (path, content type, body)."""

    def __init__(self, name: str = "w.example") -> None:
        super().__init__()
        # shut down within 10 ms of the test's end, not serve_forever's default 0.5 s
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,),
                                       daemon=True)
        self.signer = parse_key(new_key(name))
        self.requests: list[tuple[str, str, bytes]] = []
        self.released = threading.Event()

    @property
    def vkey(self) -> str:
        return cosigner_verifier(self.signer).text()

    def line(self, checkpoint: str, at: int = COSIGNED_AT) -> str:
        """This witness's cosignature line on ``checkpoint`` (a signed note or its text)."""
        return note.cosign(note.parse(checkpoint).text if "\n\n" in checkpoint
                           else checkpoint, self.signer, at).line()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        self.requests.append((handler.path, handler.headers.get("Content-Type", ""), body))
        self.reply(handler, body)

    def reply(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        raise NotImplementedError

    def stopping(self) -> None:
        self.released.set()

    @property
    def bodies(self) -> list[bytes]:
        return [body for _, _, body in self.requests]


class RealWitness(Recording):
    """``memplane witness serve``'s witness, in this process: it checks the log's signature and
    the consistency proof, keeps its state in ``directory``, and cosigns at COSIGNED_AT."""

    def __init__(self, directory: Path, log: Log, name: str = "w.example") -> None:
        super().__init__(name)
        self.witness = Witness(self.signer, [log.signer.verifier], State(directory),
                               clock=lambda: COSIGNED_AT)
        self.log = log

    def holds(self, size: int) -> RealWitness:
        """Start from having cosigned the log at ``size``."""
        self.witness.state.put(self.log.origin, size, self.log.root(size))
        return self

    def reply(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        got = self.witness.add_checkpoint(body)
        answer(handler, got.status, {"Content-Type": got.content_type}, got.body.encode())

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.witness.state.close()


class Scripted(Recording):
    """Answers every request with ``status``, ``headers`` and ``body``, hangs up at once
    (``status`` 0), or ``hold``s it until the test is over (a witness that never answers)."""

    def __init__(self, status: int = 200, body: bytes = b"",
                 headers: dict[str, str] | None = None, *, hold: bool = False,
                 name: str = "w.example") -> None:
        super().__init__(name)
        self.status, self.body, self.hold = status, body, hold
        self.headers = {"Content-Type": "text/plain"} if headers is None else headers

    def reply(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if self.hold:
            self.released.wait(30)
            return
        if self.status == 0:  # hang up without an answer
            handler.close_connection = True
            return
        answer(handler, self.status, self.headers, self.body)


@dataclass
class Clock:
    """``time.monotonic`` as the witnesses module sees it: ``now``, moved by the test (or by
    ``step`` at each reading); each reading is counted, and a server can wait for one."""

    now: float = 0.0
    step: float = 0.0
    readings: int = 0
    stopped: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)

    def monotonic(self) -> float:
        with self.changed:
            value = self.now
            self.now += self.step
            self.readings += 1
            self.changed.notify_all()
            return value

    def wait_readings(self, count: int) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.readings >= count or self.stopped, timeout=30)

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            self.changed.notify_all()


class Trickle(Recording):
    """Answers 200 with ``pieces`` (time, bytes), one at a time: before each it sets the
    clock to the piece's time, and sends the next only once the client has read the clock
    for this one (its deadline, then once per piece), so each piece is one reading."""

    def __init__(self, clock: Clock, pieces: list[tuple[float, bytes]]) -> None:
        super().__init__()
        self.clock, self.pieces = clock, pieces

    def reply(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(sum(len(p) for _, p in self.pieces)))
        handler.end_headers()
        for index, (at, piece) in enumerate(self.pieces):
            with self.clock.changed:
                self.clock.now = at
            handler.wfile.write(piece)
            handler.wfile.flush()
            self.clock.wait_readings(index + 2)
            if self.clock.stopped:
                return

    def stopping(self) -> None:
        super().stopping()
        self.clock.stop()


class Endless(Recording):
    """Answers 200 with a chunked body that never ends (junk lines, 4 KiB a chunk) until the
    client hangs up or the test is over."""

    chunk = b"junk\n" * 819 + b"j\n"

    def reply(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        while not self.released.is_set() and sent < 10_000:
            try:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(self.chunk), self.chunk))
                handler.wfile.flush()
            except OSError:
                return
            sent += 1
        handler.close_connection = True


def add_witness(world: World, url: str, vkey: str, *, cosigned_size: int = 0,
                last_status: str | None = None, tenant: uuid.UUID | None = None) -> uuid.UUID:
    """A witness row after the tenant's others; its id."""
    tid = tenant or world.tenant
    with world.sessions() as session:
        begin_write(session)
        position = len(witnesses.rows(session, tid))
        row = AuditWitness(tenant_id=tid, position=position, name=f"w{position}", url=url,
                           verifier_key=vkey, created_at=utcnow(),
                           cosigned_size=cosigned_size, last_status=last_status)
        session.add(row)
        session.commit()
        return row.id


def witness_rows(world: World, tenant: uuid.UUID | None = None) -> list[AuditWitness]:
    with world.sessions() as session:
        found = list(session.scalars(select(AuditWitness).where(
            AuditWitness.tenant_id == (tenant or world.tenant)).order_by(AuditWitness.position)))
        session.expunge_all()
        return found


def collect(world: World, log: Log, size: int, old: int, *,
            prove: Callable[[int, int], list[bytes]] | None = None,
            note_text: str | None = None, proof: list[bytes] | None = None,
            tenant: uuid.UUID | None = None) -> witnesses.Collected:
    with world.sessions() as session:
        return witnesses.collect(session, world.settings, tenant or world.tenant,
                                 note_text or log.checkpoint(size), old,
                                 log.proof(old, size) if proof is None else proof,
                                 prove=prove)


__all__ = ["Clock", "Endless", "Log", "RealWitness", "Recording", "Scripted", "Trickle",
           "a_vkey", "add_witness", "closed_port", "collect", "new_log", "witness_rows",
           "witness_world"]
