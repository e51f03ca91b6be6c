"""The cost of routing an agent's user memories to its own storage configuration.

In-process (services over SQLite and local buckets, no HTTP), one thread: sets per second
and SQL statements per set for user memories written (a) without an agent, (b) by an agent
with no settings, (c) by an agent whose settings send its user memories to a named
configuration. The agent's settings are cached in the data plane, so (b) and (c) should
issue as many statements per write as (a). Prints one line per mode and the ratios. Not a
test.

    .venv/bin/python bench/agent_routing.py [--n 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from control_plane.addresses import MemoryAddress, Scope
from control_plane.agents import service as agents
from control_plane.agents.schemas import AgentIn
from control_plane.identity import Actor
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.storage_config import named
from control_plane.storage_config.schemas import NamedLocalConfigIn
from control_plane.tenants.service import create_tenant

MODES = ("no agent", "agent, no settings", "agent, own config")


def run(mode: str, n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(Settings(data_dir=Path(tmp), sqlite_synchronous="NORMAL",
                                   run_background=False, local_storage_roots=[Path(tmp)]))
        runtime.migrate()
        statements = 0

        def count(*_: Any) -> None:
            nonlocal statements
            statements += 1

        try:
            with runtime.sessions() as session:
                tenant, _ = create_tenant(session, "bench")
            actor = Actor(tenant.id, "api", "bench")
            agent = None if mode == "no agent" else "bench-bot"
            if mode == "agent, own config":
                with runtime.sessions() as session:
                    body = NamedLocalConfigIn.model_validate({
                        "name": "own", "storage_type": "local",
                        "connection_config": {"root": str(Path(tmp) / "own")}})
                    made = named.create(session, runtime.plane, actor, body, allow_local=True,
                                        local_roots=[Path(tmp)])
                    agents.put_agent(session, runtime.plane, actor, "bench-bot",
                                     AgentIn.model_validate({"memory": {"userMemory": {
                                         "storageConfigId": made.storage_config_id}}}))
            meta = MemoryMeta(agent_id=agent)
            value = "x" * 256
            addresses = [MemoryAddress.parse(Scope.user, f"u{i % 50}", f"k{i}")
                         for i in range(n)]
            with runtime.sessions() as session:  # warm up: keys created, caches filled
                for address in addresses[:50]:
                    memories.set_value(session, runtime.plane, actor, address, value, meta)
            event.listen(runtime.engine, "before_cursor_execute", count)
            started = time.perf_counter()
            with runtime.sessions() as session:
                for address in addresses:
                    memories.set_value(session, runtime.plane, actor, address, value, meta)
            elapsed = time.perf_counter() - started
            event.remove(runtime.engine, "before_cursor_execute", count)
            return n / elapsed, statements / n
        finally:
            runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):
        for mode in MODES:
            rate, per_write = run(mode, args.n)
            if mode not in best or rate > best[mode][0]:
                best[mode] = (rate, per_write)
    base = best["no agent"][0]
    for mode in MODES:
        rate, per_write = best[mode]
        print(f"{mode:<20} {rate:8.0f} sets/s  {per_write:5.2f} SQL statements/set  "
              f"ratio {rate / base:4.2f}")


if __name__ == "__main__":
    main()
