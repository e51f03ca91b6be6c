"""Request dependencies: the session that owns the transaction, the caller, the data plane.

They run on the event loop and touch the database only when they must (a key not yet in the
caller cache, a denied role, a transaction left open at the end), and then in the thread
pool: a request costs one hop to a worker thread (the endpoint), not one per dependency.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from .runtime import Runtime
from .storage_config.plane import DataPlane
from .tenants.service import Caller, authenticate, cached_caller, require_role


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


def _finish(session: Session, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


async def get_session(request: Request) -> AsyncIterator[Session]:
    session = get_runtime(request).sessions()
    try:
        yield session
    except BaseException:
        await run_in_threadpool(_finish, session, False)
        raise
    if session.in_transaction():
        await run_in_threadpool(_finish, session, True)
    else:
        session.close()  # nothing open: no I/O


SessionDep = Annotated[Session, Depends(get_session)]


async def get_plane(request: Request) -> DataPlane:
    return get_runtime(request).plane


PlaneDep = Annotated[DataPlane, Depends(get_plane)]


def _authenticate(runtime: Runtime, authorization: str | None) -> Caller:
    with runtime.sessions() as session:
        return authenticate(session, authorization)


async def get_caller(request: Request,
                     authorization: Annotated[str | None, Header(include_in_schema=False)] = None
                     ) -> Caller:
    runtime = get_runtime(request)
    found = cached_caller(runtime.engine, authorization)
    if found is not None:
        return found
    return await run_in_threadpool(_authenticate, runtime, authorization)


def _deny(runtime: Runtime, caller: Caller, roles: tuple[str, ...], action: str) -> None:
    with runtime.sessions() as session:
        require_role(session, caller, roles, action)  # records the refusal, then raises


def _role(*roles: str, action: str):  # type: ignore[no-untyped-def]
    # The caller is found here rather than through Depends(get_caller): each dependency level
    # costs FastAPI's resolution on the event loop, for every request.
    async def dependency(request: Request,
                         authorization: Annotated[str | None,
                                                  Header(include_in_schema=False)] = None
                         ) -> Caller:
        caller = await get_caller(request, authorization)
        if caller.role not in roles:
            await run_in_threadpool(_deny, get_runtime(request), caller, roles, action)
        return caller
    return Depends(dependency)


AnyCaller = Annotated[Caller, Depends(get_caller)]
AdminCaller = Annotated[Caller, _role("admin", action="manage keys and settings")]
WriterCaller = Annotated[Caller, _role("admin", "agent", action="write memories")]
ReaderCaller = Annotated[Caller, _role("admin", "agent", "compliance", action="read memories")]
ComplianceCaller = Annotated[Caller, _role("admin", "compliance", action="read the audit log")]
