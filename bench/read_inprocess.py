"""A verified read's (or a write's) CPU in one thread, memplane's application against the HTTP
floor's.

``python -m bench.read_inprocess [--op read|write] [--database sqlite|postgres]
[--reads 1000] [--profile DIR] [--floor-first]`` builds both ASGI applications (memplane's
``create_app``, background off; ``bench/http_floor.py``'s), each on a database and local
bucket of its own, writes 200 values of 1 KiB to each and reads them ``--reads`` times,
twice, through ASGI in this one thread with the thread pool replaced by an inline call (the
request's whole work on one clock, ``time.thread_time``), and prints the CPU per read of each
(``--op write``: each pass writes ``--reads`` new keys of 1 KiB instead). With ``--profile
DIR`` one more pass of each runs under cProfile with a CPU clock, saved as
``DIR/{memplane,floor}.pstats`` (the parts of docs/performance/read-profile-2026-12-06.md
were read from them). Run it for two checkouts one after the other and compare memplane ÷
floor within each process.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import resource
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread

from .cases import BODY
from .stacks import ADMIN_KEY, Backends, MemplaneStack

ASGI = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                Awaitable[None]]
KEYS = 200
_JSON = [(b"content-type", b"application/json")]


async def _inline(func: Callable[..., Any], *args: Any, **_: Any) -> Any:
    return func(*args)


async def _call(app: ASGI, method: str, path: str, headers: list[tuple[bytes, bytes]],
                body: bytes = b"") -> None:
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
               "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
               "query_string": b"", "root_path": "", "headers": headers,
               "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}, receive, send)
    if status != [200]:
        raise RuntimeError(f"{method} {path} answered {status}")


async def _started(app: Any) -> tuple[asyncio.Queue[dict[str, str]], asyncio.Task[None]]:
    queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    await queue.put({"type": "lifespan.startup"})
    up = asyncio.Event()

    async def send(message: Any) -> None:
        if message["type"] == "lifespan.startup.complete":
            up.set()
        elif message["type"].endswith("failed"):
            raise RuntimeError(message)

    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}},
                                   queue.get, send))
    await up.wait()
    return queue, task


def _user_time() -> float:
    """This thread's CPU time in user space (the rest is the kernel's: file system, fsync)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_utime


async def _pass(asgi: ASGI, op: str, prefix: str, headers: list[tuple[bytes, bytes]],
                count: int, turn: int) -> None:
    """``count`` reads of the keys written first, or writes of new keys (``turn`` names
    them apart from another pass's)."""
    if op == "read":
        for i in range(count):
            await _call(asgi, "GET", f"{prefix}{i % KEYS}", headers)
        return
    for i in range(count):
        await _call(asgi, "PUT", f"{prefix}w{turn}-{i}", headers + _JSON, BODY)


async def run(database: str, reads: int, profile: Path | None, op: str = "read",
              floor_first: bool = False) -> None:
    from control_plane.app import create_app
    from control_plane.settings import Settings

    from .http_floor import build_floor
    from .http_floor import create_app as floor_app

    anyio.to_thread.run_sync = _inline  # type: ignore[assignment]
    backends = Backends()
    stacks = [MemplaneStack(backends, database, "local") for _ in range(2)]

    def settings_of(stack: MemplaneStack) -> Settings:
        values = {k[len("MEMPLANE_"):].lower(): v for k, v in stack.env.items()}
        return Settings(**values, run_background=False)  # type: ignore[arg-type]

    app = create_app(settings_of(stacks[0]))
    queue, task = await _started(app)
    floor = build_floor(settings_of(stacks[1]), stacks[1].actor.tenant_id)
    try:
        auth = [(b"authorization", f"Bearer {ADMIN_KEY}".encode()), (b"host", b"x")]
        systems: list[tuple[str, Any, str, list[tuple[bytes, bytes]]]] = [
            ("memplane", app, "/v1/memories/user/bench/k", auth),
            ("floor", floor_app(floor), "/floor/k", [(b"host", b"x")])]
        for _, asgi, prefix, headers in systems:
            for i in range(KEYS):
                await _call(asgi, "PUT", f"{prefix}{i}", headers + _JSON, BODY)
        for stack in stacks:
            stack.analyze()
        if floor_first:
            systems.reverse()
        for name, asgi, prefix, headers in systems:
            await _pass(asgi, op, prefix, headers, 300, 0)  # warm-up
            for turn in (1, 2):
                started, user = time.thread_time(), _user_time()
                await _pass(asgi, op, prefix, headers, reads, turn)
                cpu = (time.thread_time() - started) / reads * 1e6
                user = (_user_time() - user) / reads * 1e6
                print(f"{database}: {name} {cpu:.0f} µs CPU per {op} ({user:.0f} in user "
                      "space)", flush=True)
            if profile is not None:
                profiler = cProfile.Profile(time.thread_time)
                profiler.enable()
                await _pass(asgi, op, prefix, headers, reads, 3)
                profiler.disable()
                profile.mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(os.fspath(profile / f"{name}.pstats"))
    finally:
        await queue.put({"type": "lifespan.shutdown"})
        await task
        floor.close()
        for stack in stacks:
            stack.close()
        backends.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read_inprocess")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--op", choices=("read", "write"), default="read")
    parser.add_argument("--floor-first", action="store_true",
                        help="measure the floor before memplane")
    args = parser.parse_args()
    asyncio.run(run(args.database, args.reads, args.profile, args.op, args.floor_first))


if __name__ == "__main__":
    main()
