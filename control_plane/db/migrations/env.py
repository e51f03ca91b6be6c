from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from control_plane.db import models  # noqa: F401  (registers every table)
from control_plane.db.base import Base

target_metadata = Base.metadata


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through control_plane.db.migrate, which passes a connection")
run(connection)
