"""A bounded soak under faults: mixed work across many tenants on a real ``memplane serve``
(PostgreSQL, each tenant's own S3 bucket on moto behind one TCP proxy) through a bucket
outage and a PostgreSQL restart in the middle.

Bars: no error outside the outage windows (inside them a 503 only: ``storage_unavailable``
with Retry-After for the bucket, any 503 for the database); every acknowledged write reads
back its last acknowledged value (or a later write refused during the database window whose
commit may have landed); the server's RSS grows < 10% from the end of warm-up to the end;
its open files come back to their baseline; its PostgreSQL connections stay within its pools
and none is left in a transaction once the load has stopped."""

from __future__ import annotations

import os
import random
import secrets
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from tests.support.emulators import MotoServer, new_s3_bucket
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess, TcpProxy
from tests.support.service import RECEIPT_KEY

from .soak_probes import ENGINE_PROCESSES, POOL_SIZE, ServerProbes

ADMIN_KEY = "mp_soak_" + secrets.token_hex(12)
RSS_GROWTH_BAR = 0.10
FD_SLACK = 8
READBACK_CHUNK = 250  # gets per batch request
READBACK_THREADS = 4  # batch requests in flight
READBACK_TRIES = 4  # a get the server could not answer is asked again
READBACK_BUDGET_S = 600.0  # the whole read-back; what is unread by then fails the bar
SETTLE_S = 2.0  # after a backend returns, requests started this soon may still see it away
KINDS = ("write", "overwrite", "read", "search", "event", "export", "erase")
WEIGHTS = (25, 25, 25, 10, 10, 3, 2)


@dataclass
class Window:
    name: str  # "bucket" or "database"
    start: float
    end: float = float("inf")

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end + SETTLE_S


@dataclass
class Op:
    kind: str
    started: float
    ended: float
    status: int  # 0: no HTTP answer
    error: str = ""
    retry_after: bool = False
    detail: str = ""  # a failed job's error, as GET /v1/jobs/{id} gives it
    subject: str = ""  # an erasure's data subject
    request_id: str = ""  # the X-Request-ID it was sent with (the server logs it)


@dataclass
class Ledger:
    """What the clients saw: every operation, and per key its acknowledged and refused values."""

    ops: list[Op] = field(default_factory=list)
    acked: dict[tuple[int, str], int] = field(default_factory=dict)
    maybe: dict[tuple[int, str], set[int]] = field(default_factory=dict)
    erased: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)


class Soak:
    def __init__(self, minutes: float, tenants: int = 50, threads: int = 6,
                 seed: int = 46) -> None:
        self.seconds = minutes * 60
        self.tenants_n, self.threads_n, self.seed = tenants, threads, seed
        self.root = Path(tempfile.mkdtemp(prefix="memplane-soak-"))
        self.ledger = Ledger()
        self.windows: list[Window] = []
        self.stop = threading.Event()
        self.keys: list[str] = []
        self.figures: dict[str, Any] = {}
        self.sent = threading.local()  # the request id of the thread's last request
        self.sent_n = 0

    # --- backends and server -------------------------------------------------------------
    def _start(self) -> None:
        # What PostgreSQL itself saw of a stall: statements over 1 s, lock waits over 1 s, and
        # each checkpoint with its write and sync times (the figures' ``database_log``).
        self.pg = PostgresCluster(durable=True, settings=(
            "log_min_duration_statement=1000", "log_lock_waits=on", "deadlock_timeout=1s",
            "log_checkpoints=on")).start()
        self.moto = MotoServer()
        self.moto.start()
        config = new_s3_bucket(self.moto)
        self.proxy = TcpProxy(self.moto.port)
        query = {k: v for k, v in config.items() if k not in ("bucket", "endpoint_url")}
        # The proxy's cut refuses and drops connections, so in it a call fails at once
        # whatever its timeouts. Out of it, a call to moto through the proxy (both in Python,
        # on a loaded machine) can take seconds: a read timeout of 3 s turned such calls into
        # 503s after the bucket came back (10 in the 20-minute run of 2026-12-05). Two
        # attempts, the adapter's default: moto's ListObjectVersions deep-copies the whole
        # bucket and fails with a 500 when a write lands meanwhile (moto 5.2.5, a TypeError),
        # which a client retries as it retries any S3 500; with one attempt, erasures failed.
        query |= {"endpoint_url": self.proxy.endpoint, "connect_timeout": 2,
                  "read_timeout": 15, "max_attempts": 2}
        self.db_name = f"soak_{secrets.token_hex(4)}"
        url = self.pg.create_database(self.db_name)
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        env = {"MEMPLANE_DATABASE_URL": url, "MEMPLANE_SERVER_KEY": secrets.token_hex(32),
               "MEMPLANE_RECEIPT_SIGNING_KEY": RECEIPT_KEY,
               "MEMPLANE_DATA_DIR": str(self.root), "MEMPLANE_ADMIN_KEY": ADMIN_KEY,
               "MEMPLANE_DB_POOL_SIZE": str(POOL_SIZE),
               # Full by the end of warm-up, so the RSS bar sees what is not a cache filling
               # with the soak's growing data (the default holds 1M vectors, ~120 MB here).
               "MEMPLANE_SEARCH_CACHE_ROWS": "2000",
               "MEMPLANE_ALLOWED_ENDPOINTS": "127.0.0.1/32",  # the tenants' buckets, below
               "MEMPLANE_DEFAULT_BUCKET_URL": f"s3://{config['bucket']}?{urlencode(query)}"}
        self.log = self.root / "server.log"  # the server's own output, kept for a failed bar
        self.server = ServerProcess(env, output=self.log).start(timeout=120)
        self.probes = ServerProbes(self.server, self.pg, self.db_name, self.moto)
        with httpx.Client(base_url=self.server.base_url, timeout=30,
                          headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            for i in range(self.tenants_n):
                r = http.post("/v1/tenants", json={"name": f"soak-{i}"})
                r.raise_for_status()
                self.keys.append(r.json()["api_key"])
        # Each tenant brings its own bucket, as enterprise tenants do, on the one moto behind
        # the one proxy. In one shared bucket each erasure's version listing deep-copied every
        # tenant's objects in moto (docs/soak.md, 2026-12-06). Timeouts: the adapter's own.
        for key in self.keys:
            bucket = new_s3_bucket(self.moto)
            own = bucket | {"endpoint_url": self.proxy.endpoint}
            r = httpx.put(f"{self.server.base_url}/v1/storage/config", timeout=60,
                          headers={"Authorization": f"Bearer {key}"},
                          json={"storage_type": "s3", "connection_config": own})
            r.raise_for_status()

    def _close(self) -> None:
        for stop in (self.server.stop, self.proxy.cut, self.moto.stop, self.pg.stop):
            try:
                stop()
            except Exception:  # noqa: BLE001 - tearing down, the figures are taken
                pass

    # --- the load ---------------------------------------------------------------------------
    def _stamp(self, request: httpx.Request) -> None:
        """Each request goes with an id of its own, which the server's slow-request warning
        names: a request the client gave up on shows whether the server ever finished it."""
        with self.ledger.lock:
            self.sent_n += 1
            self.sent.request_id = request.headers["X-Request-ID"] = f"soak-{self.sent_n}"

    def _call(self, kind: str, fn: Any) -> httpx.Response | None:
        started = time.monotonic()
        self.sent.request_id = ""
        try:
            response: httpx.Response = fn()
        except httpx.HTTPError as exc:
            self.ledger.add(Op(kind, started, time.monotonic(), 0, type(exc).__name__,
                               request_id=self.sent.request_id))
            return None
        error = ""
        if response.status_code >= 400:
            try:
                error = str(response.json().get("error", ""))
            except ValueError:
                error = response.text[:80]
        self.ledger.add(Op(kind, started, time.monotonic(), response.status_code, error,
                           "Retry-After" in response.headers))
        return response

    def _job(self, kind: str, http: httpx.Client, post: Any, subject: str = "") -> bool:
        """A job from its request to its end, recorded as one operation over that span."""
        started = time.monotonic()
        response = self._call(kind + "-request", post)
        if response is None or response.status_code != 202:
            return False
        job_id, state, why = response.json()["id"], "queued", ""
        deadline = time.monotonic() + 120
        while state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
            polled = self._call(kind + "-poll", lambda: http.get(f"/v1/jobs/{job_id}"))
            if polled is not None and polled.status_code == 200:
                state, why = polled.json()["state"], polled.json().get("error") or ""
        self.ledger.add(Op(kind, started, time.monotonic(), 200 if state == "completed" else 0,
                           "" if state == "completed" else f"job {state}",
                           detail=why[:200], subject=subject))
        return state == "completed"

    def _worker(self, t: int) -> None:
        rng = random.Random(self.seed * 1000 + t)
        clients = [httpx.Client(base_url=self.server.base_url, timeout=20,
                                headers={"Authorization": f"Bearer {key}"},
                                event_hooks={"request": [self._stamp]})
                   for key in self.keys]
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                self._one(t, rng, clients, n)
        finally:
            for client in clients:
                client.close()

    def _one(self, t: int, rng: random.Random, clients: list[httpx.Client], n: int) -> None:
        tenant = rng.randrange(len(clients))
        http = clients[tenant]
        kind = rng.choices(KINDS, WEIGHTS)[0]
        key = f"k{t}-{rng.randrange(20 if kind == 'overwrite' else 400)}"
        if kind in ("write", "overwrite"):
            self._write(t, tenant, http, key, n)
        elif kind == "read":
            self._call("read", lambda: http.get(f"/v1/memories/user/soak/{key}"))
        elif kind == "search":
            query = f"value {rng.randrange(100)}"
            self._call("search", lambda: http.post("/v1/search",
                                                   json={"query": query, "limit": 5}))
        elif kind == "event":
            self._call("event", lambda: http.post("/v1/events", json={
                "scope": "user", "scope_ref": "soak", "kind": "note", "body": f"note {n}"}))
        elif kind == "export":
            self._job("export", http, lambda: http.post(
                "/v1/subjects/alice/export", json={"format": "json"}))
        else:
            self._erase(t, tenant, http, n)

    def _write(self, t: int, tenant: int, http: httpx.Client, key: str, n: int) -> None:
        kind = "overwrite" if (tenant, key) in self.ledger.acked else "write"
        response = self._call(kind, lambda: http.put(
            f"/v1/memories/user/soak/{key}",
            json={"value": {"n": n, "text": f"value {n % 100}"}, "user_id": "alice"}))
        with self.ledger.lock:
            if response is not None and response.status_code == 200:
                self.ledger.acked[(tenant, key)] = n
                self.ledger.maybe.pop((tenant, key), None)
            else:  # refused or unanswered: it may still have landed
                self.ledger.maybe.setdefault((tenant, key), set()).add(n)

    def _erase(self, t: int, tenant: int, http: httpx.Client, n: int) -> None:
        subject = f"gone-{t}-{n}"
        put = self._call("write", lambda: http.put(
            f"/v1/memories/user/{subject}/k", json={"value": n, "user_id": subject}))
        if put is None or put.status_code != 200:
            return
        if self._job("erase", http, lambda: http.post(f"/v1/subjects/{subject}/erase",
                                                      json={}), subject):
            with self.ledger.lock:
                self.ledger.erased.append((tenant, subject))

    # --- the run ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self._start()
        try:
            return self._run()
        finally:
            self._close()

    def _run(self) -> dict[str, Any]:
        total, begin = self.seconds, time.monotonic()
        self.begin = begin
        warm_end = begin + 0.2 * total
        bucket_at, bucket_for = begin + 0.35 * total, max(5.0, 0.08 * total)
        db_at, db_for = begin + 0.6 * total, max(3.0, 0.03 * total)
        workers = [threading.Thread(target=self._worker, args=(t,), daemon=True)
                   for t in range(self.threads_n)]
        for worker in [*workers, threading.Thread(target=self.probes.sample, daemon=True,
                                                  args=(begin, self.stop))]:
            worker.start()
        self._sleep_until(warm_end)
        probes = self.probes
        rss_warm, fds_base, (conns_base, _) = probes.rss_kb(), probes.fds(), probes.connections()
        self.figures["processes"] = {"warm": probes.processes(), **probes.by_process("warm")}
        self._sleep_until(bucket_at)
        window = Window("bucket", time.monotonic())
        self.windows.append(window)
        self.proxy.cut()
        self._sleep_until(bucket_at + bucket_for)
        self.proxy.restore()
        window.end = time.monotonic()
        self._sleep_until(db_at)
        window = Window("database", time.monotonic())
        self.windows.append(window)
        self.pg.halt()
        self._sleep_until(db_at + db_for)
        self.pg.resume()
        window.end = time.monotonic()
        self._sleep_until(begin + total)
        self.stop.set()
        for worker in workers:
            worker.join(timeout=180)
        rss_end = self.probes.rss_kb()
        self.figures["processes"] |= {"end": self.probes.processes(),
                                      **self.probes.by_process("end"), "timeline": probes.timeline}
        readback = self._read_back()
        self.figures["settled_s"] = self.probes.settle()
        time.sleep(3)  # connections the pool let go of are gone from pg_stat_activity
        fds_end, conns_end = self.probes.fds(), self.probes.at_rest()
        return self._figures(time.monotonic() - begin, rss_warm, rss_end, fds_base, fds_end,
                             conns_base, conns_end, readback)

    def _sleep_until(self, at: float) -> None:
        while (left := at - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))

    def _read_back(self) -> dict[str, Any]:
        """Every acknowledged write and every erased subject, read back through the batch API:
        per tenant, chunks of ``READBACK_CHUNK`` gets on ``READBACK_THREADS`` clients at once,
        within ``READBACK_BUDGET_S``. The check stays exact: a get the batch could not answer
        (5xx, no answer) is asked again with the rest of its chunk still unread, up to
        ``READBACK_TRIES`` times; a key still unread when the budget is spent counts as
        ``unchecked`` and fails the bar."""
        with self.ledger.lock:
            acked = sorted(self.ledger.acked.items())
            maybe = {k: set(v) for k, v in self.ledger.maybe.items()}
            erased = list(self.ledger.erased)
        wanted: dict[int, list[tuple[str, str]]] = {}
        for (tenant, key), _ in acked:
            wanted.setdefault(tenant, []).append(("soak", key))
        for tenant, subject in erased:
            wanted.setdefault(tenant, []).append((subject, "k"))
        chunks = [(tenant, addresses[i:i + READBACK_CHUNK])
                  for tenant, addresses in sorted(wanted.items())
                  for i in range(0, len(addresses), READBACK_CHUNK)]
        deadline = time.monotonic() + READBACK_BUDGET_S
        found: dict[tuple[int, str, str], tuple[int, Any]] = {}
        local = threading.local()
        opened: list[httpx.Client] = []
        opened_lock = threading.Lock()

        def read_chunk(tenant: int, addresses: list[tuple[str, str]]) -> None:
            # One client per thread, each request with its tenant's key: a client per tenant
            # and thread would hold hundreds of connections for nothing.
            if not hasattr(local, "http"):
                local.http = httpx.Client(base_url=self.server.base_url, timeout=60)
                with opened_lock:
                    opened.append(local.http)
            answers = self._batch_get(local.http, self.keys[tenant], addresses, deadline)
            for (ref, key), answer in zip(addresses, answers, strict=True):
                found[(tenant, ref, key)] = answer

        started = time.monotonic()
        try:
            with ThreadPoolExecutor(READBACK_THREADS) as pool:
                for future in [pool.submit(read_chunk, tenant, addresses)
                               for tenant, addresses in chunks]:
                    future.result()
        finally:
            for http in opened:
                http.close()
        wrong = missing = unchecked = erased_left = 0
        for (tenant, key), n in acked:
            status, value = found.get((tenant, "soak", key), (0, None))
            if status == 0:
                unchecked += 1
            elif status != 200:
                missing += 1
            else:
                allowed = {n} | {m for m in maybe.get((tenant, key), ()) if m > n}
                wrong += not (isinstance(value, dict) and value.get("n") in allowed)
        for tenant, subject in erased:
            status, _ = found.get((tenant, subject, "k"), (0, None))
            unchecked += status == 0
            erased_left += status not in (0, 404)
        return {"checked": len(acked), "missing": missing, "wrong": wrong,
                "unchecked": unchecked, "seconds": round(time.monotonic() - started, 1),
                "erased_checked": len(erased), "erased_still_there": erased_left}

    def _batch_get(self, http: httpx.Client, key: str, addresses: list[tuple[str, str]],
                   deadline: float) -> list[tuple[int, Any]]:
        """(status, value) per address, in order; status 0 when no answer came at all."""
        answers: list[tuple[int, Any]] = [(0, None)] * len(addresses)
        todo = list(range(len(addresses)))
        for _ in range(READBACK_TRIES):
            if not todo or time.monotonic() >= deadline:
                break
            ops = [{"op": "get", "scope": "user", "scope_ref": addresses[i][0],
                    "key": addresses[i][1]} for i in todo]
            try:
                r = http.post("/v1/memories:batch", json={"operations": ops},
                              headers={"Authorization": f"Bearer {key}"})
            except httpx.HTTPError:
                continue
            if r.status_code != 200:
                continue
            for i, result in zip(todo, r.json()["results"], strict=True):
                answers[i] = (int(result["status"]), result.get("value"))
            todo = [i for i in todo if answers[i][0] >= 500]  # a 5xx after every try: missing
        return answers

    def _classify(self, op: Op) -> str:
        """``ok``, ``window`` (a refusal the window allows), ``emulator`` (an erasure that
        failed while moto answered its listings with moto's own 500) or ``error``."""
        if 200 <= op.status < 300 or (op.status == 404 and op.kind == "read"):
            return "ok"
        if op.subject and op.subject in self.moto_faults and \
                op.detail.startswith("storage_unavailable"):
            return "emulator"
        for window in self.windows:
            if window.holds(op.started) or window.holds(op.ended) or (
                    op.started < window.start and op.ended > window.end):
                if op.kind in ("export", "erase") and op.error.startswith("job failed"):
                    return "window"
                if window.name == "bucket" and op.status == 503 and op.retry_after \
                        and op.error == "storage_unavailable":
                    return "window"
                if window.name == "database" and op.status == 503:
                    return "window"
        return "error"

    moto_faults: set[str] = set()

    def _figures(self, elapsed: float, rss_warm: int, rss_end: int, fds_base: int, fds_end: int,
                 conns_base: int, conns_end: tuple[int, int],
                 readback: dict[str, Any]) -> dict[str, Any]:
        self.moto_faults = self.probes.moto_faults()
        by_kind = Counter(op.kind for op in self.ledger.ops)
        classes = Counter(self._classify(op) for op in self.ledger.ops)
        errors = [op for op in self.ledger.ops if self._classify(op) == "error"]
        refused = Counter(f"{w.name}:{op.status}:{op.error}" for op in self.ledger.ops
                          for w in self.windows if self._classify(op) == "window"
                          and (w.holds(op.started) or w.holds(op.ended)))
        growth = (rss_end - rss_warm) / rss_warm if rss_warm else 0.0
        bars = {
            "no error outside the windows": not errors,
            "no 500 anywhere": all(op.status < 500 or op.status == 503 for op in self.ledger.ops),
            "every acknowledged write read back": readback["missing"] == readback["wrong"]
            == readback["unchecked"] == 0,
            "every erased subject gone": readback["erased_still_there"] == 0,
            f"RSS growth after warm-up < {RSS_GROWTH_BAR:.0%}": growth < RSS_GROWTH_BAR,
            f"fds back to baseline (+ {FD_SLACK} at most)": fds_end <= fds_base + FD_SLACK,
            f"PostgreSQL connections within the pools ({ENGINE_PROCESSES} × {POOL_SIZE})":
                conns_end[0] <= ENGINE_PROCESSES * POOL_SIZE,
            "no connection left in a transaction at rest": conns_end[1] == 0,
        }
        return {
            "seconds": round(elapsed, 1), "tenants": self.tenants_n, "threads": self.threads_n,
            "operations": dict(sorted(by_kind.items())), "outcomes": dict(classes),
            "refused_in_windows": dict(refused),
            "windows": [{"name": w.name, "at": round(w.start - self.begin, 1),
                         "seconds": round(w.end - w.start, 1)}
                        for w in self.windows],
            "first_errors": [{"op": f"{op.kind}:{op.status}:{op.error}", "detail": op.detail,
                              "at": round(op.started - self.begin, 1),
                              "seconds": round(op.ended - op.started, 1)} for op in errors[:5]],
            "server_log": str(self.log),
            "slow_requests": self.probes.slow_requests(
                [op.request_id for op in errors if op.status == 0 and op.request_id]),
            "database_log": self.probes.database_log(),
            "errors": Counter(f"{op.kind}:{op.status}:{op.error}" for op in errors)
            .most_common(10),
            "readback": readback, "rss_kb": {"warm": rss_warm, "end": rss_end,
                                              "growth": round(growth, 4)},
            "processes": self.figures["processes"],
            "fds": {"baseline": fds_base, "end": fds_end,
                    "driver": len(os.listdir("/proc/self/fd"))},
            "settled_s": self.figures.get("settled_s"),
            "connections": {"warm": conns_base, "end": conns_end[0],
                            "in_transaction_at_rest": conns_end[1],
                            "in_transaction": self.probes.last_in_transaction},
            "bars": bars,
        }


def run(minutes: float = 20.0, tenants: int = 50, threads: int = 6) -> dict[str, Any]:
    """The soak's figures and bars (``bars``: name → passed)."""
    return Soak(minutes, tenants, threads).run()


def report(minutes: float) -> int:
    """``python -m bench --only soak --minutes N``: the figures as JSON, then the bars;
    exit 1 if one fails."""
    import json

    figures = run(minutes)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "soak.json").write_text(json.dumps({"minutes": minutes} | figures, indent=1))
    print(json.dumps({k: v for k, v in figures.items() if k != "bars"}, indent=1))
    for name, passed in figures["bars"].items():
        print(f"{'PASS' if passed else 'FAIL'}  {name}")
    return 0 if all(figures["bars"].values()) else 1
