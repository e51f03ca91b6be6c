"""Statements run straight on the driver fail with the same exceptions a Session raises."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import literal, select

from control_plane.db import direct
from control_plane.db.engine import make_engine
from tests.support.emulators import free_port


def test_an_unreachable_database_is_sqlalchemys_operational_error() -> None:
    engine = make_engine(f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    try:
        with pytest.raises(sa_exc.OperationalError):
            direct.run(engine, select(literal(1)), {})
    finally:
        engine.dispose()
