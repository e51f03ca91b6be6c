"""Alembic, driven from code: ``memplane db upgrade`` and the embedded default's start-up."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

_HERE = Path(__file__).parent


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE / "migrations"))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "heads") -> None:
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The applied revision(s); parallel branches (one per domain) give several heads."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        heads = MigrationContext.configure(connection).get_current_heads()
    return ", ".join(sorted(heads)) or None


def script_heads() -> list[str]:
    """Every head revision the migration scripts define."""
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(_HERE / "migrations"))
    return sorted(ScriptDirectory.from_config(config).get_heads())


def applied_count(engine: Engine) -> tuple[int, int]:
    """How many migrations the database has applied, of how many the scripts define (the
    parallel branches' revisions all counted: one number a person can compare)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(_HERE / "migrations"))
    script = ScriptDirectory.from_config(config)
    with engine.connect() as connection:
        heads = MigrationContext.configure(connection).get_current_heads()
    applied = {rev.revision for rev in script.iterate_revisions(heads, "base")} if heads else set()
    return len(applied), sum(1 for _ in script.walk_revisions())
