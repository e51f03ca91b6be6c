"""What the soak measures of the server it runs (bench/soak.py): the memory, processes and
files of the server's process tree, its PostgreSQL connections at rest, and moto's own
faults, read from moto's log."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from control_plane.db.models import WANTS_VECTOR
from tests.support.emulators import MotoServer
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess

# The server's pool size in the soak. Its two processes with a database engine (the server
# and its background process) keep at most this many idle connections each once the load has
# stopped (a peak's extra ones are closed when returned), whatever the run's peak was.
POOL_SIZE = 10
ENGINE_PROCESSES = 2
REST_SAMPLES = 6  # pg_stat_activity looked at this many times, 0.5 s apart, at rest
# moto's log line of a failed ListObjectVersions under an erased subject's prefix
# (werkzeug colours the line: escape codes around the request)
_MOTO_VERSIONS_500 = re.compile(r'GET /[^ ?]+\?versions&prefix=tenants/[^/ ]+/'
                                r'(?:memories|events)/user/(gone-\d+-\d+)/[^"]*" 500 ')


class ServerProbes:
    def __init__(self, server: ServerProcess, pg: PostgresCluster, db_name: str,
                 moto: MotoServer) -> None:
        self.server, self.pg, self.db_name, self.moto = server, pg, db_name, moto
        self.last_in_transaction: list[dict[str, Any]] = []
        self.timeline: list[list[int]] = []  # [seconds, server VmRSS kB, server threads]

    @property
    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def _tree(self) -> list[int]:
        """The server's process and every descendant it spawned (none today: ``memplane
        serve`` is one process), so a worker or helper process would be measured too."""
        pids, i = [self.pid], 0
        while i < len(pids):
            for task in Path(f"/proc/{pids[i]}/task").glob("*/children"):
                try:
                    pids += [int(c) for c in task.read_text().split()]
                except OSError:  # the task ended meanwhile
                    pass
            i += 1
        return pids

    def rss_kb(self) -> int:
        """VmRSS summed over the server and its descendants (``_tree``)."""
        total = 0
        for pid in self._tree():
            try:
                lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            except OSError:  # a child that ended between the listing and the read
                continue
            total += sum(int(line.split()[1]) for line in lines if line.startswith("VmRSS:"))
        if not total:
            raise RuntimeError("no VmRSS")
        return total

    def processes(self) -> int:
        return len(self._tree())

    def by_process(self, when: str) -> dict[str, dict[str, int]]:
        """Each process's VmRSS (kB) and thread count, keyed ``rss_kb_<when>`` and
        ``threads_<when>``: a process whose threads grow in number may grow in memory
        with them (each thread's stack, and the allocator's arena it may get)."""
        return {f"rss_kb_{when}": self._status_by_process("VmRSS:"),
                f"threads_{when}": self._status_by_process("Threads:")}

    def sample(self, begin: float, stop: threading.Event, every_s: float = 30.0) -> None:
        """Every ``every_s`` until ``stop``: seconds since ``begin``, the server process's
        VmRSS (kB) and threads, appended to ``timeline``."""
        while not stop.wait(every_s):
            server = self._status_of(self.pid)
            self.timeline.append([round(time.monotonic() - begin), server.get("VmRSS:", 0),
                                  server.get("Threads:", 0)])

    @staticmethod
    def _status_of(pid: int) -> dict[str, int]:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            return {}
        return {line.split()[0]: int(line.split()[1]) for line in lines
                if line.startswith(("VmRSS:", "Threads:"))}

    def _status_by_process(self, field: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for pid in self._tree():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            text = b" ".join(argv).decode(errors="replace")
            role = ("server" if pid == self.pid else "background" if "spawn_main" in text
                    else "resource tracker" if "resource_tracker" in text else f"pid {pid}")
            found[role] = found.get(role, 0) + self._status_of(pid).get(field, 0)
        return found

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def connections(self) -> tuple[int, int]:
        """The server's connections to its database: all of them, and those inside a
        transaction they are not running a statement of (``idle in transaction``: a session
        never closed holds one)."""
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.pg.port}/postgres",
                             autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE state LIKE 'idle in transaction%%') "
                "FROM pg_stat_activity WHERE datname = %s", (self.db_name,)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def at_rest(self) -> tuple[int, int]:
        """``connections()`` once the load has stopped: the most connections and the fewest
        left in a transaction over ``REST_SAMPLES`` looks (a background round may be in one
        at any single look; a leaked session is in one at every look). The last statement of
        each connection still in a transaction at the last look goes to the figures."""
        looks = []
        for i in range(REST_SAMPLES):
            if i:
                time.sleep(0.5)
            looks.append(self.connections())
        self.last_in_transaction = self.in_transaction()
        return max(n for n, _ in looks), min(t for _, t in looks)

    def settle(self, budget_s: float = 180.0) -> float:
        """Wait until the server's background work has caught up (no memory waits for its
        vector, no job is queued or running), at most ``budget_s``: the connection bars look
        at a server at rest, not at an indexer round holding its claim's transaction."""
        import psycopg

        started = time.monotonic()
        url = f"postgresql://postgres@127.0.0.1:{self.pg.port}/{self.db_name}"
        with psycopg.connect(url, autocommit=True) as conn:
            while time.monotonic() - started < budget_s:
                row = conn.execute(
                    f"SELECT (SELECT count(*) FROM memory_pointers WHERE {WANTS_VECTOR}), "
                    "(SELECT count(*) FROM jobs WHERE state IN ('queued', 'running'))"
                ).fetchone()
                if row is not None and row[0] == row[1] == 0:
                    break
                time.sleep(1.0)
        return round(time.monotonic() - started, 1)

    def in_transaction(self) -> list[dict[str, Any]]:
        """The server's connections inside a transaction: how long, and their last
        statement (SQL with its parameters as placeholders, never their values)."""
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.pg.port}/postgres",
                             autocommit=True) as conn:
            rows = conn.execute(
                "SELECT state, extract(epoch FROM now() - xact_start), left(query, 300) "
                "FROM pg_stat_activity WHERE datname = %s AND xact_start IS NOT NULL "
                "AND pid <> pg_backend_pid()", (self.db_name,)).fetchall()
        return [{"state": state, "seconds": round(float(age), 1), "query": query}
                for state, age, query in rows]

    def moto_faults(self) -> set[str]:
        """The erasure subjects whose listing of versions moto itself failed (a 500 with its
        ``TypeError`` in ``list_object_versions``: moto 5.2.5 deep-copies the whole bucket's
        keys while other requests change them), read from moto's own log."""
        try:
            log = self.moto.log_path.read_text(errors="replace")
        except OSError:
            return set()
        if "TypeError: 'NoneType' object is not iterable" not in log:
            return set()
        return set(_MOTO_VERSIONS_500.findall(log))

    def slow_requests(self, gave_up: list[str]) -> dict[str, Any]:
        """The server's ``slow request`` warnings (``MEMPLANE_SLOW_REQUEST_SECONDS``, 5 s by
        default), read from its log: how many, the slowest, per route; and of the requests
        the client gave up on (``gave_up``, their request ids), those the server finished
        late and how long each took there (one it never logged was still running at the end,
        or never reached the server); and the ``event loop late`` warnings."""
        import json

        output = self.server.output
        lines = output.read_text(errors="replace").splitlines() if output else []
        slow, late = [], []
        for line in lines:
            for marker, into in (('"slow request"', slow), ('"event loop late"', late)):
                if marker in line:
                    try:
                        into.append(json.loads(line))
                    except ValueError:
                        continue
        routes = Counter(f"{r.get('method')} {r.get('route')}" for r in slow)
        by_id = {r.get("request_id"): r for r in slow}
        return {
            "count": len(slow),
            "max_ms": max((float(r.get("duration_ms", 0)) for r in slow), default=0.0),
            "routes": dict(routes.most_common(8)),
            "client_gave_up": len(gave_up),
            "finished_late": [{"request_id": i, "route": by_id[i].get("route"),
                               "status": by_id[i].get("status"),
                               "duration_ms": by_id[i].get("duration_ms")}
                              for i in gave_up if i in by_id],
            # the loop's stalls (observability/loop_lag.py), the longest with the CPU the
            # process and the loop's thread used while it lasted
            "loop_late": {"count": len(late), "worst": max(
                ({k: r.get(k) for k in ("time", "late_ms", "process_cpu_ms",
                                        "loop_thread_cpu_ms")} for r in late),
                key=lambda r: float(r["late_ms"] or 0), default=None)},
        }

    def database_log(self) -> dict[str, Any]:
        """What PostgreSQL logged of slowness (the soak starts it with
        ``log_min_duration_statement=1000``, ``log_lock_waits`` after 1 s and
        ``log_checkpoints``): statements over 1 s (count, slowest, the commonest first words;
        never their parameters), lock waits over 1 s, and the checkpoints' longest sync and
        total times. Commits that waited on the WAL's flush show as slow ``COMMIT``s."""
        try:
            lines = self.pg.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return {}
        statements: list[tuple[float, str]] = []
        syncs, totals, waits = [], [], 0
        for line in lines:
            if (m := _PG_DURATION.search(line)) is not None:
                statements.append((float(m[1]), " ".join(m[2].split()[:4])[:60]))
            elif "still waiting for" in line:
                waits += 1
            elif (c := _PG_CHECKPOINT.search(line)) is not None:
                syncs.append(float(c[1]))
                totals.append(float(c[2]))
        return {
            "slow_statements": len(statements),
            "slowest_ms": max((ms for ms, _ in statements), default=0.0),
            "statements": dict(Counter(text for _, text in statements).most_common(6)),
            "lock_waits": waits,
            "checkpoints": len(syncs),
            "checkpoint_sync_max_s": max(syncs, default=0.0),
            "checkpoint_total_max_s": max(totals, default=0.0),
        }


_PG_DURATION = re.compile(r"duration: ([\d.]+) ms\s+(?:statement|execute [^:]*): (.*)")
_PG_CHECKPOINT = re.compile(r"checkpoint complete:.* sync=([\d.]+) s, total=([\d.]+) s")
