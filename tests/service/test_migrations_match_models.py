"""The migrations build exactly the schema the models describe, on both databases.

Every domain adds its own migration branch; a column or index that a model names but no
migration creates (or the reverse) fails here, not in production.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from control_plane.db import models  # noqa: F401  (registers every table)
from control_plane.db.base import Base
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade


def _fresh_url(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if database == "sqlite":
        return f"sqlite:///{tmp_path / 'schema.db'}"
    url: str = request.getfixturevalue("postgres").create_database()
    return url


def test_migrated_schema_has_no_drift_from_the_models(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    engine = make_engine(_fresh_url(database, request, tmp_path))
    try:
        upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": False})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    # alembic_version is the migrations' own table; nothing else may differ.
    assert [d for d in diff if "alembic_version" not in repr(d)] == []
