"""Request dependencies: the session that owns the transaction, the caller, the data plane.

They run on the event loop and touch the database only when they must (a key not yet in the
caller cache, a denied role, a transaction left open at the end), and then in the thread
pool: a request costs one hop to a worker thread (the endpoint), not one per dependency.

The busiest routes (a memory's read, write, append and delete, the batch, the pointer
listing, search, the event log's append) take none: FastAPI's solving of dependencies cost
up to a tenth of such a request. They open ``call_of`` in their worker thread instead, which
finds the caller, requires the role and opens the session the same way.

The key itself is checked before any of this, by the request middleware (key_gate.py),
before the body is read: it leaves the caller in the request's scope
(:data:`CALLER_IN_SCOPE`), where ``get_caller`` and ``call_of`` find it.

This module sits below every domain: it knows the running service only as
:class:`Services` (what it uses of ``request.app.state.runtime``), and a refused role is
recorded in the audit log by the service's ``refuse``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import Depends, Header, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from .identity import Caller, authenticate, cached_caller
from .plane.data_plane import DataPlane
from .settings import Settings


class Services(Protocol):
    """What the dependencies, and the routes through them, use of the running service
    (``request.app.state.runtime``, a control_plane.runtime.Runtime)."""

    engine: Engine
    settings: Settings
    plane: DataPlane

    def sessions(self) -> Session:
        """A new session of the control-plane database."""
        ...

    def refuse(self, session: Session, caller: Caller, roles: tuple[str, ...],
               action: str) -> None:
        """Record in the audit log that ``caller`` lacks ``roles`` for ``action``, and raise
        Forbidden."""
        ...


def get_runtime(request: Request) -> Services:
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


def _authenticate(runtime: Services, authorization: str | None) -> Caller:
    with runtime.sessions() as session:
        return authenticate(session, authorization)


# Where the key gate leaves the caller it authenticated, in the request's ASGI scope.
CALLER_IN_SCOPE = "memplane.caller"


async def find_caller(runtime: Services, authorization: str | None) -> Caller:
    """The caller an ``Authorization`` header names (the cache first, then the database);
    raises Unauthorized. The one lookup of a key, for the key gate and the dependencies."""
    found = cached_caller(runtime.engine, authorization)
    if found is not None:
        return found
    return await run_in_threadpool(_authenticate, runtime, authorization)


async def get_caller(request: Request,
                     authorization: Annotated[str | None, Header(include_in_schema=False)] = None
                     ) -> Caller:
    checked: Caller | None = request.scope.get(CALLER_IN_SCOPE)
    if checked is not None:
        return checked
    return await find_caller(get_runtime(request), authorization)


@dataclass(frozen=True)
class Role:
    """Who may do what: the roles allowed, and the action a refusal names."""

    roles: tuple[str, ...]
    action: str


ADMIN = Role(("admin",), "manage keys and settings")
WRITER = Role(("admin", "agent"), "write memories")
READER = Role(("admin", "agent", "compliance"), "read memories")
COMPLIANCE = Role(("admin", "compliance"), "read the audit log")
# The routes a data subject's own key (role user) may call too: its subject's memories,
# events, entries and search (``identity.Access`` keeps it to them).
SUBJECT_WRITER = Role(("admin", "agent", "user"), "write memories")
SUBJECT_READER = Role(("admin", "agent", "compliance", "user"), "read memories")


def _deny(runtime: Services, caller: Caller, role: Role) -> None:
    with runtime.sessions() as session:
        runtime.refuse(session, caller, role.roles, role.action)  # records the refusal, raises


def needs_role(role: Role):  # type: ignore[no-untyped-def]
    """The dependency that gives the caller if their key has one of ``role``'s roles (a
    refusal is audited): ``Annotated[Caller, needs_role(role)]``."""
    # The caller is found here rather than through Depends(get_caller): each dependency level
    # costs FastAPI's resolution on the event loop, for every request.
    async def dependency(request: Request,
                         authorization: Annotated[str | None,
                                                  Header(include_in_schema=False)] = None
                         ) -> Caller:
        caller = await get_caller(request, authorization)
        if caller.role not in role.roles:
            await run_in_threadpool(_deny, get_runtime(request), caller, role)
        return caller
    return Depends(dependency)


AnyCaller = Annotated[Caller, Depends(get_caller)]
AdminCaller = Annotated[Caller, needs_role(ADMIN)]
WriterCaller = Annotated[Caller, needs_role(WRITER)]
ReaderCaller = Annotated[Caller, needs_role(READER)]
ComplianceCaller = Annotated[Caller, needs_role(COMPLIANCE)]
SubjectWriterCaller = Annotated[Caller, needs_role(SUBJECT_WRITER)]
SubjectReaderCaller = Annotated[Caller, needs_role(SUBJECT_READER)]


@dataclass(frozen=True)
class Call:
    """What a route without dependencies works with: its caller, session and data plane."""

    caller: Caller
    session: Session
    plane: DataPlane


@contextmanager
def call_of(request: Request, role: Role) -> Iterator[Call]:
    """In a sync route's worker thread, what ``ReaderCaller``/``WriterCaller``, ``SessionDep``
    and ``PlaneDep`` give: the caller (their key checked, ``role`` required, a refusal
    audited) and the request's session — committed if the route leaves a transaction open,
    rolled back if it raises."""
    runtime = get_runtime(request)
    caller: Caller | None = request.scope.get(CALLER_IN_SCOPE)
    if caller is None:
        authorization = request.headers.get("authorization")
        caller = cached_caller(runtime.engine, authorization) or _authenticate(runtime,
                                                                               authorization)
    if caller.role not in role.roles:
        _deny(runtime, caller, role)
    session = runtime.sessions()
    try:
        yield Call(caller, session, runtime.plane)
        if session.in_transaction():
            session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
