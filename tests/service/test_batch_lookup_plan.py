"""A batch's lookups probe the address index once per item (``hotpath_many.LOOKUP_MANY``):
a plan that hashes the batch against a scan of the tenant's every pointer looks cheaper on a
table of a few thousand rows, and a connection keeps that plan while the table grows past
it (a LangGraph store's batch of 50 took 43 ms at 63,000 pointers)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from control_plane.addresses import MemoryAddress, Scope
from control_plane.identity import Actor
from control_plane.memories import service as memories
from control_plane.memories.hotpath_many import LOOKUP_MANY, lookup_rows
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.grown import grow

pytestmark = pytest.mark.databases("postgres")





def _scans(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (node type, relation) of a plan that reads memory_pointers."""
    found = []
    if plan.get("Relation Name") == "memory_pointers":
        found.append((plan["Node Type"], plan.get("Index Name", "")))
    for child in plan.get("Plans", []):
        found.extend(_scans(child))
    return found


def test_a_batchs_lookup_probes_the_address_index_on_a_table_grown_since_its_analyze(
        own_runtime: Runtime) -> None:
    with own_runtime.sessions() as session:
        tenant = create_tenant(session, "lookups")[0].id
        actor = Actor(tenant, "api", "test")
        for i in range(16):
            memories.set_value(session, own_runtime.plane, actor,
                               MemoryAddress.parse(Scope.agent, "store", f"k{i}"), i,
                               MemoryMeta())
    with own_runtime.engine.connect() as conn:
        # A table of 3,000 memories, analyzed: the plans made now are the ones a connection
        # keeps while the table grows, until the next ANALYZE.
        conn.execute(text("ALTER TABLE memory_pointers SET (autovacuum_enabled = false)"))
        grow(conn, 3_000)
        conn.execute(text("ANALYZE memory_pointers"))
        conn.commit()

    writes = [(MemoryAddress.parse(Scope.agent, "store", f"grown/{n}"), None)
              for n in range(1, 51)]
    params = lookup_rows(tenant, writes)
    sql = LOOKUP_MANY.text
    with own_runtime.engine.connect() as conn:
        rows = conn.execute(LOOKUP_MANY, params).all()
        assert [row.id is not None for row in rows] == [True] * 50  # each found
        # The plan made for these values, and the one a prepared statement keeps for any.
        (custom,) = conn.execute(text(f"EXPLAIN (FORMAT JSON) {sql}"), params).scalar_one()
        conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql("PREPARE lookup(text, uuid) AS " + sql.replace(
            ":v_rows", "$1").replace(":v_tenant", "$2"))
        literal = params["v_rows"].replace("'", "''")  # EXECUTE's arguments take no $n
        (generic,) = conn.exec_driver_sql(
            f"EXPLAIN (FORMAT JSON) EXECUTE lookup('{literal}', '{tenant}')").scalar_one()
        conn.rollback()
    index = "uq_memory_pointers_tenant_id_scope_type_scope_ref_key"
    assert _scans(custom["Plan"]) == [("Index Scan", index)]
    assert _scans(generic["Plan"]) == [("Index Scan", index)]
