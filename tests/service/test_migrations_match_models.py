"""The migrations build exactly the schema the models describe, on both databases.

Every domain adds its own migration branch; a column or index that a model names but no
migration creates (or the reverse) fails here, not in production.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

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


@pytest.mark.databases("postgres")
def test_hot_tables_are_analyzed_after_a_few_thousand_changes(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # A lookup by address needs statistics that know the tenant's rows; autovacuum's default
    # (10 % of the table) would leave a large table's bulk-writing new tenant unplanned.
    engine = make_engine(_fresh_url(database, request, tmp_path))
    try:
        upgrade(engine)
        with engine.connect() as conn:
            options = dict(conn.execute(text(
                "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:names)"),
                {"names": ["memory_pointers", "subject_keys", "memory_events",
                           "access_logs"]}).all())
    finally:
        engine.dispose()
    expected = ["autovacuum_analyze_threshold=2000", "autovacuum_analyze_scale_factor=0.01"]
    assert options == {name: expected for name in ("memory_pointers", "subject_keys",
                                                   "memory_events", "access_logs")}
