"""schemathesis hooks for the second-tenant fuzz run (tests/faults/test_fuzz_api.py).

Loaded by ``st run`` through ``SCHEMATHESIS_HOOKS``; the first tenant's ids arrive as JSON in
``MEMPLANE_FUZZ_TENANT_ONE``. Every path parameter is replaced by one of those ids (and the
id-like query filters too), and the check ``tenant_one_stays_hidden`` fails any 2xx that
names them — or any list answer that shows them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from hypothesis import strategies as st

ONE: dict[str, Any] = json.loads(os.environ.get("MEMPLANE_FUZZ_TENANT_ONE", "{}"))
# Every value that names something of the first tenant.
NAMES: set[str] = {str(v) for values in ONE.values() for v in values}
# Lists answer 2xx with the caller's own items (none here); they must not show the first
# tenant's rows, and clearing a scope must clear nothing of it.
LISTS = {("GET", "/v1/pointers"), ("GET", "/v1/audit"), ("GET", "/v1/events"),
         ("GET", "/v1/entries"), ("GET", "/memory"), ("GET", "/memory/events"),
         ("DELETE", "/v1/memories/{scope}/{scope_ref}")}
# Which ids each path parameter takes; a parameter not named here (a later route's id) takes
# the first tenant's pointer ids.
PARAMETERS = {"scope": "scopes", "scope_ref": "scope_refs", "key": "keys",
              "key_id": "api_key_ids", "job_id": "job_ids", "receipt_id": "receipt_ids",
              "user_id": "user_ids", "event_id": "event_ids", "entry_id": "entry_ids"}
QUERIES = {"pointer_id": "pointer_ids", "scope_ref": "scope_refs", "user_id": "user_ids",
           "scopeRef": "scope_refs"}
# Flags an id route takes: always valid, so the route goes on to look the id up (a malformed
# flag would be a 422 before the lookup, and the id never tried).
FLAGS = {"refresh_ttl"}


@schemathesis.hook
def flatmap_path_parameters(context: schemathesis.HookContext,
                            path_parameters: dict[str, Any]) -> Any:
    if not path_parameters:
        return st.just(path_parameters)
    return st.fixed_dictionaries({
        name: st.sampled_from(ONE[PARAMETERS.get(name, "pointer_ids")])
        for name in path_parameters
    })


@schemathesis.hook
def map_query(context: schemathesis.HookContext, query: dict[str, Any]) -> dict[str, Any]:
    if not query:
        return query
    return {name: (ONE[QUERIES[name]][0] if name in QUERIES
                   else True if name in FLAGS else value)
            for name, value in query.items()}


def _log(operation: tuple[str, str], case: Any, status: int) -> None:
    """One line per checked response naming the first tenant's ids it carried (the test
    reads it to see that every id route was tried with them)."""
    path = os.environ.get("MEMPLANE_FUZZ_LOG")
    if path:
        named = sorted(k for k, v in (case.path_parameters or {}).items() if str(v) in NAMES)
        with open(path, "a") as log:
            log.write(json.dumps([*operation, status, named]) + "\n")


@schemathesis.check
def tenant_one_stays_hidden(ctx: Any, response: Any, case: Any) -> bool | None:
    operation = (case.method.upper(), case.operation.path)
    _log(operation, case, response.status_code)
    if not 200 <= response.status_code < 300:
        return None
    if operation in LISTS:
        body = response.json()
        shown = [item for item in body.get("items", [])
                 if str(item.get("pointer_id") or item.get("id")) in NAMES]
        assert not shown, f"{operation} showed the first tenant's rows: {shown}"
        assert body.get("deleted", 0) == 0, f"{operation} deleted the first tenant's memories"
        return None
    # A conversation or agent id is a name the caller chooses, like a memory address: the
    # second tenant reaching one under the same string reaches its own (its first message
    # creates it), never the first tenant's. So is a data subject's user id: GET
    # /v1/subjects/{user_id} answers what the caller's own tenant holds under it (nothing).
    named = {k: v for k, v in (case.path_parameters or {}).items() if str(v) in NAMES
             and k not in ("scope", "conversation_id", "agent_id", "user_id")}
    assert not named, (f"the second tenant got {response.status_code} on {operation} with the "
                       f"first tenant's {named}")
    return None
