"""Request dependencies: the session that owns the transaction, the caller, the data plane."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from .runtime import Runtime
from .storage_config.plane import DataPlane
from .tenants.service import Caller, authenticate, require_role


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


def get_session(request: Request) -> Iterator[Session]:
    session = get_runtime(request).sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def get_plane(request: Request) -> DataPlane:
    return get_runtime(request).plane


PlaneDep = Annotated[DataPlane, Depends(get_plane)]


def get_caller(session: SessionDep,
               authorization: Annotated[str | None, Header(include_in_schema=False)] = None
               ) -> Caller:
    return authenticate(session, authorization)


def _role(*roles: str, action: str):  # type: ignore[no-untyped-def]
    def dependency(session: SessionDep, caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
        require_role(session, caller, roles, action)
        return caller
    return Depends(dependency)


AnyCaller = Annotated[Caller, Depends(get_caller)]
AdminCaller = Annotated[Caller, _role("admin", action="manage keys and settings")]
WriterCaller = Annotated[Caller, _role("admin", "agent", action="write memories")]
ReaderCaller = Annotated[Caller, _role("admin", "agent", "compliance", action="read memories")]
ComplianceCaller = Annotated[Caller, _role("admin", "compliance", action="read the audit log")]
