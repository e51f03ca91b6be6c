"""The search's live statement binds, for the driver, exactly the values SQLAlchemy binds
for it: its own (tenant, scopes, policy terms) converted once, the run's parameters on each
run; on SQLite and PostgreSQL, with a scoped key and retention policies."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from control_plane.db import direct
from control_plane.db.models import RetentionPolicy
from control_plane.identity import Access, Grant
from control_plane.search import repository as repo

TENANT = uuid.UUID("0194a2b3-0000-7000-8000-000000000001")
NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)


def _reference(query: repo.LiveQuery, parameters: dict[str, Any]) -> Any:
    """What SQLAlchemy itself binds: every value from ``construct_params``, each through
    its type's bind processor."""
    compiled = query.statement.compile(dialect=query._compiled.dialect)
    values = compiled.construct_params(parameters)
    for name, process in compiled._bind_processors.items():
        if name in values:
            values[name] = process(values[name])
    return values if query.order is None else [values[name] for name in query.order]


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.psycopg.dialect()],
                         ids=["sqlite", "postgresql"])
@pytest.mark.parametrize("by_ids", [True, False])
def test_the_bound_values_are_sqlalchemys(dialect: Any, by_ids: bool) -> None:
    policies = [RetentionPolicy(id=uuid.uuid4(), tenant_id=TENANT, scope_type="agent",
                                memory_type="*", retention_days=30, auto_delete=True),
                RetentionPolicy(id=uuid.uuid4(), tenant_id=TENANT, scope_type="user",
                                memory_type="fact", retention_days=7, auto_delete=True)]
    access = Access((Grant("agent", "a-1"), Grant("user", "u-9")), None)
    statement = repo.live_statement(
        TENANT, [("agent", "a-1"), ("user", "u-9")], policies=policies, by_ids=by_ids,
        user_id=not by_ids, memory_type=not by_ids, access=access,
        where=repo.segment_where(TENANT, None, None, access), dialect=dialect)
    ids = [uuid.UUID(int=i) for i in (7, 3, 11)]
    parameters = repo.live_parameters(policies, NOW)
    if by_ids:
        parameters["ids"] = direct.id_list(ids, dialect)
    else:
        parameters |= {"user_id": "u-9", "memory_type": "fact"}

    first = statement.values(parameters)
    later = statement.values(repo.live_parameters(policies, NOW.replace(hour=15))
                             | {k: v for k, v in parameters.items()
                                if not k.startswith(("now", "cut_"))})

    assert first == _reference(statement, parameters)
    assert first != later  # another time: the run's own values, not the first run's
    assert later == _reference(statement, {**parameters, **repo.live_parameters(
        policies, NOW.replace(hour=15))})
    assert statement.values({**parameters, "unknown": 1}) == first  # extra names: not sent
