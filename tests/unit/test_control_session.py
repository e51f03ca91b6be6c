"""The control plane's session: ``commit()`` with no transaction open begins none; with one
open it commits as SQLAlchemy's does. The caller cache keys callers by the database."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event, text
from sqlalchemy.orm import Session, SessionTransaction

from control_plane.db.engine import ControlSession, make_engine, make_session_factory
from control_plane.tenants import service as tenants


def test_commit_without_a_transaction_begins_none(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    created: list[SessionTransaction] = []
    with make_session_factory(engine)() as session:
        assert isinstance(session, ControlSession)
        event.listen(session, "after_transaction_create",
                     lambda _s, transaction: created.append(transaction))
        session.commit()
        session.commit()
        assert created == []
        assert not session.in_transaction()
    engine.dispose()


def test_commit_with_a_transaction_open_commits_it(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with make_session_factory(engine)() as session:
        session.execute(text("CREATE TABLE t (n INTEGER)"))
        session.execute(text("INSERT INTO t VALUES (7)"))
        assert session.in_transaction()
        session.commit()
        assert not session.in_transaction()
    with Session(engine) as other:
        assert other.scalars(text("SELECT n FROM t")).all() == [7]
    engine.dispose()


def test_callers_are_kept_per_database(tmp_path: Path) -> None:
    first = make_engine(f"sqlite:///{tmp_path / 'first.sqlite'}")
    second = make_engine(f"sqlite:///{tmp_path / 'second.sqlite'}")
    assert tenants._where(first) == f"sqlite:///{tmp_path / 'first.sqlite'}"
    assert tenants._where(second) == f"sqlite:///{tmp_path / 'second.sqlite'}"
    assert tenants._where(first) is tenants._where(first)
    first.dispose()
    second.dispose()
