"""The live statement's list parameters go to PostgreSQL as the text of an array
(``db.direct.id_list``, ``repository.text_array``), cast in SQL: PostgreSQL must read back exactly
the values the search meant, whatever characters a token holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import make_url

from control_plane.db import direct
from control_plane.search import repository as repo

# PostgreSQL text holds any character but NUL.
_TEXT = st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=40)


@pytest.fixture(scope="module")
def conn(postgres: Any) -> Iterator[psycopg.Connection]:
    url = make_url(postgres.create_database()).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as c:
        yield c


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_TEXT, max_size=8))
def test_any_text_comes_back_as_it_was(conn: psycopg.Connection, values: list[str]) -> None:
    (back,) = conn.execute("SELECT %s::text[]", [repo.text_array(values)]).fetchone()
    assert back == values


def test_tokens_versions_and_ids_as_the_statement_casts_them(
        conn: psycopg.Connection) -> None:
    ids = [uuid.UUID(int=7), uuid.uuid4(), uuid.UUID("0194a2b3-0000-7000-8000-00000000abcd")]
    tokens = ['0194a2b3:30:true:agent:*', 'a,b', '{x}', 'say "hi"', 'back\\slash', 'NULL', '']
    row = conn.execute(
        "SELECT %s::uuid[], %s::int[], %s::text[]",
        [direct.id_list(ids, postgresql.psycopg.dialect()), repo.text_array([3, 1, 12]),
         repo.text_array(tokens)]).fetchone()
    assert row == (ids, [3, 1, 12], tokens)
    assert repo.text_array([]) == "{}"
