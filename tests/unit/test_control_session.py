"""The control plane's session: ``commit()`` with no transaction open begins none; with one
open it commits as SQLAlchemy's does. The caller cache keys callers by the database."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, Table, event, text
from sqlalchemy.orm import Session, SessionTransaction, registry

from control_plane.db.engine import ControlSession, make_engine, make_session_factory
from control_plane.identity import authentication


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
    assert authentication._where(first) == f"sqlite:///{tmp_path / 'first.sqlite'}"
    assert authentication._where(second) == f"sqlite:///{tmp_path / 'second.sqlite'}"
    assert authentication._where(first) is authentication._where(first)
    first.dispose()
    second.dispose()


def test_changes_made_after_a_commit_are_committed_by_the_next(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    factory = make_session_factory(engine)
    with factory() as session:
        session.execute(text("CREATE TABLE k (id INTEGER PRIMARY KEY, n INTEGER)"))
        session.commit()
    table = Table("k", MetaData(), Column("id", Integer, primary_key=True), Column("n", Integer))

    class Row:
        id: int
        n: int

    registry().map_imperatively(Row, table)
    with factory() as session:
        row = Row()
        row.id, row.n = 1, 1
        session.add(row)
        session.commit()
        row.n = 2  # a loaded object changed with no transaction open
        session.commit()
        session.delete(row)
        session.commit()
    with factory() as session:
        assert session.execute(text("SELECT count(*) FROM k")).scalar_one() == 0
    with factory() as session:
        again = Row()
        again.id, again.n = 2, 1
        session.add(again)
        session.commit()
        again.n = 3
        session.commit()
    with factory() as session:
        assert session.execute(text("SELECT n FROM k WHERE id = 2")).scalar_one() == 3
    engine.dispose()


def test_close_with_nothing_open_releases_nothing_and_the_session_goes_on(
        tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    session = make_session_factory(engine)()
    kept_map = session.identity_map
    session.close()  # nothing open: returns at once, the same (empty) identity map kept
    assert session.identity_map is kept_map
    assert session.execute(text("SELECT 1")).scalar_one() == 1  # usable after close
    assert session.in_transaction()
    session.close()  # a transaction open: closed as SQLAlchemy closes it
    assert not session.in_transaction()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    engine.dispose()


def test_close_detaches_the_objects_the_session_holds(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    table = Table("c", MetaData(), Column("id", Integer, primary_key=True))

    class Row:
        id: int

    registry().map_imperatively(Row, table)
    session = make_session_factory(engine)()
    row = Row()
    session.add(row)  # pending (adding begins a transaction)
    session.close()
    assert row not in session
    assert list(session.new) == []
    engine.dispose()
