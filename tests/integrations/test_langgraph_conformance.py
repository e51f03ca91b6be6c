"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance) against
MemplaneCheckpointer on a live server, SQLite and PostgreSQL: every base capability and the
extended ones memplane implements (delete_for_runs, copy_thread, prune) must pass.

The suite is async; it runs under ``asyncio.run`` inside a sync test, over an agent key.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport

import memplane
from memplane.integrations.langgraph import MemplaneCheckpointer
from tests.support.service import Tenant

EXPECTED = {"put", "put_writes", "get_tuple", "list", "delete_thread",
            "delete_for_runs", "copy_thread", "prune"}


def run_suite(base_url: str, api_key: str) -> CapabilityReport:
    async def main() -> CapabilityReport:
        async with memplane.AsyncClient(base_url, api_key) as aclient:
            @checkpointer_test(name="MemplaneCheckpointer")
            async def factory() -> AsyncIterator[MemplaneCheckpointer]:
                yield MemplaneCheckpointer(aclient=aclient, user_id="conformance-user")

            return await validate(factory)

    return asyncio.run(main())


@pytest.mark.slow
def test_the_checkpointer_passes_every_capability_of_the_conformance_suite(
        tenant: Tenant) -> None:
    report = run_suite(tenant.stack.base_url, tenant.key("agent"))
    report.print_report()
    failures = {name: result.failures for name, result in report.results.items()
                if not result.passed}
    assert failures == {}
    assert {name for name, result in report.results.items() if result.detected} == EXPECTED
    assert report.passed_all_base()
    assert report.passed_all()
    assert sum(r.tests_passed for r in report.results.values()) == 81
