"""The HTTP floor: the audited floor's own work (object put + one statement with its audit
row; lookup + fetch + SHA-256 check + group-committed audit row) behind the leanest FastAPI
endpoint, served the way ``memplane serve`` serves memplane (uvicorn, one worker, no access
log, no middleware), so memplane over HTTP can be held to what any Python HTTP stack costs
here rather than to an in-process call.

``python -m bench.http_floor --port N [--workers N]`` with the memplane environment
(MEMPLANE_DATA_DIR, MEMPLANE_DATABASE_URL, MEMPLANE_DEFAULT_BUCKET_URL…) and
BENCH_FLOOR_TENANT (the tenant its audit rows belong to); BENCH_FLOOR_PREFIX, if set, is
where its keys go (every process of one served floor must share it).

    PUT /floor/{key}   body: the JSON memplane's PUT takes; stored as sent      -> 200 {}
    GET /floor/{key}   the stored body, verified against its SHA-256           -> 200
    POST /floor:batch  {"items": [{"key", "value"}, ...]}: stored together     -> 200 {}
"""

from __future__ import annotations

import argparse
import json
import os
import uuid

from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from control_plane.db.engine import make_engine
from control_plane.settings import Settings

from .stacks import Floor

_EMPTY = b"{}"


def create_app(floor: Floor) -> FastAPI:
    """One route per operation; the blocking work runs on the thread pool, as memplane's
    sync routes do."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.put("/floor/{key}")
    async def put(key: str, request: Request) -> Response:
        body = await request.body()
        await run_in_threadpool(floor.set, key, body)
        return Response(_EMPTY, media_type="application/json")

    @app.post("/floor:batch")
    async def batch(request: Request) -> Response:
        body = await request.json()
        items = [(item["key"], json.dumps(item["value"]).encode()) for item in body["items"]]
        await run_in_threadpool(floor.set_many, items)
        return Response(_EMPTY, media_type="application/json")

    @app.get("/floor/{key}")
    async def get(key: str) -> Response:
        data = await run_in_threadpool(floor.get, key)
        return Response(data, media_type="application/json")

    @app.get("/readyz")
    async def ready() -> Response:
        return Response(_EMPTY, media_type="application/json")

    return app


def build_floor(settings: Settings, tenant_id: uuid.UUID) -> Floor:
    engine = make_engine(settings.resolved_database_url, pool_size=settings.db_pool_size,
                         sqlite_synchronous=settings.sqlite_synchronous)
    return Floor(engine, settings.resolved_bucket_url, tenant_id,
                 prefix=os.environ.get("BENCH_FLOOR_PREFIX"))


def floor_from_environment() -> Floor:
    return build_floor(Settings(), uuid.UUID(os.environ["BENCH_FLOOR_TENANT"]))


def app_from_environment() -> FastAPI:
    """The app of one of several server processes (``--workers N``): each builds its floor
    from the environment, as each of ``memplane serve``'s workers builds its runtime."""
    return create_app(floor_from_environment())


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.http_floor")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers > 1:
        uvicorn.run("bench.http_floor:app_from_environment", factory=True,
                    workers=args.workers, host=args.host, port=args.port, access_log=False,
                    log_config=None)
        return
    floor = floor_from_environment()
    try:
        uvicorn.run(create_app(floor), host=args.host, port=args.port, access_log=False,
                    log_config=None)
    finally:
        floor.close()


if __name__ == "__main__":
    main()
