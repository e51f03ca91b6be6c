"""Liveness, readiness and metrics.

The probes never queue behind requests: ``/healthz`` answers on the event loop and
``/readyz`` asks the database from threads of its own, not from the request threads that a
tenant's slow bucket may be holding (up to its bulkhead, plane/bulkhead.py), and
neither touches any bucket. ``/readyz`` answers 503 when the database gives it no answer
within ``PROBE_SECONDS``, whether it is down or its connection pool is exhausted.
"""

from __future__ import annotations

from anyio import CapacityLimiter, move_on_after, to_thread
from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine, text

from .deps import get_runtime

router = APIRouter(tags=["health"])

PROBE_THREADS = 2
# Longest /readyz waits for the database (a connection, then SELECT 1).
PROBE_SECONDS = 2.0


def reserve_probe_threads(app: FastAPI) -> None:
    """Threads for ``/readyz`` alone (call from the lifespan, inside the event loop)."""
    app.state.probe_threads = CapacityLimiter(PROBE_THREADS)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers. No authentication; use it for liveness probes."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, response: Response) -> dict[str, str]:
    """Readiness: 200 when the control-plane database answers, 503 (with the reason) when it does
    not. No authentication; use it for readiness probes and load balancers."""
    engine = get_runtime(request).engine
    answered = False
    # The probe's own bound, far below the pool's wait for a connection (30 s): a pool that
    # requests have exhausted makes the server not ready, and the probe says so at once.
    # A probe thread still waiting is left to finish on its own (at most PROBE_THREADS).
    with move_on_after(PROBE_SECONDS):
        answered = await to_thread.run_sync(_database_answers, engine,
                                            limiter=request.app.state.probe_threads,
                                            abandon_on_cancel=True)
    if not answered:
        response.status_code = 503
        return {"status": "unavailable",
                "detail": f"the database did not answer within {PROBE_SECONDS:g} seconds "
                          "(not reachable, or every connection of the pool is in use)"}
    return {"status": "ready"}


def _database_answers(engine: Engine) -> bool:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception:
        return False
    return True


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.exposition(),
                    media_type=CONTENT_TYPE_LATEST)
