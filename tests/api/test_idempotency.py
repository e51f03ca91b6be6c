"""A write retried with the same Idempotency-Key returns the first answer and writes once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.service import Tenant


def test_retried_set_returns_the_first_answer(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        headers = {"Idempotency-Key": "req-1"}
        first = http.put("/v1/memories/user/u1/k", json={"value": 1}, headers=headers)
        again = http.put("/v1/memories/user/u1/k", json={"value": 1}, headers=headers)
        listed = http.get("/v1/pointers").json()["items"]
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [p["version"] for p in listed] == [1]
    assert len(tenant.objects()) == 1


def test_retried_append_does_not_duplicate_the_item(tenant: Tenant) -> None:
    with tenant.client() as client:
        for _ in range(3):
            client.memory.append(scope="user", scope_ref="u1", key="log", value="once",
                                 idempotency_key="append-1")
        client.memory.append(scope="user", scope_ref="u1", key="log", value="twice",
                             idempotency_key="append-2")
        assert client.memory.get(scope="user", scope_ref="u1", key="log").value == [
            "once", "twice"]


def test_reusing_a_key_for_another_request_is_refused(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/u1/k", json={"value": 1}, headers={"Idempotency-Key": "x"})
        other = http.put("/v1/memories/user/u1/k", json={"value": 2},
                         headers={"Idempotency-Key": "x"})
        value = http.get("/v1/memories/user/u1/k").json()["value"]
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    assert "different request" in other.json()["detail"]
    assert value == 1


TWINS = 4
WAIT = 60  # seconds; reached only when the test is broken


@pytest.mark.parametrize("path", ["/v1/memories/user/u1/race",
                                  "/v1/memories/user/u1/race-list/append"])
def test_concurrent_twins_write_once(tenant: Tenant, path: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every twin is held just after it found no earlier answer to replay until all of them
    are there, so all are provably in flight at once; then one writes and the rest replay."""
    in_flight = threading.Barrier(TWINS, timeout=WAIT)
    met: list[int] = []

    def hold_until_all_twins_arrived(step: str) -> None:
        if step == "idempotency:checked":
            met.append(in_flight.wait())

    monkeypatch.setattr(tenant.stack.runtime.plane, "checkpoint", hold_until_all_twins_arrived)

    def send(_: int) -> tuple[dict[str, object], str | None]:
        with tenant.stack.http(tenant.admin_key) as http:
            method = "POST" if path.endswith("append") else "PUT"
            response = http.request(method, path, json={"value": "v"},
                                    headers={"Idempotency-Key": "twin"}, timeout=WAIT)
            assert response.status_code == 200, response.text
            return response.json(), response.headers.get("Idempotent-Replayed")

    with ThreadPoolExecutor(max_workers=TWINS) as pool:
        answers = list(pool.map(send, range(TWINS)))
    assert sorted(met) == list(range(TWINS))  # all twins met past the replay check
    assert len({a["id"] for a, _ in answers}) == 1
    assert {a["version"] for a, _ in answers} == {1}
    assert sorted(str(replayed) for _, replayed in answers) == ["None"] + ["true"] * (TWINS - 1)
    assert len(tenant.objects()) == 1


def test_keys_are_each_api_keys_own(tenant: Tenant) -> None:
    """API keys of one tenant sending the same Idempotency-Key: none replays, probes or
    collides with another's answer; each key's own retry replays its own."""
    first_key, second_key, third_key = (tenant.key("agent") for _ in range(3))
    same = {"Idempotency-Key": "shared-key"}
    event = {"scope": "user", "scope_ref": "u1", "kind": "note", "body": "hello"}
    with tenant.stack.http(first_key) as first, tenant.stack.http(second_key) as second, \
            tenant.stack.http(third_key) as third:
        mine = first.put("/v1/memories/user/u1/k", json={"value": 1}, headers=same)
        # Another request under the same key is not "already used" for another API key.
        collision = second.post("/v1/events", json=event, headers=same)
        # The very same request from another key is that key's own write, not a replay.
        probe = third.put("/v1/memories/user/u1/k", json={"value": 1}, headers=same)
        mine_again = first.put("/v1/memories/user/u1/k", json={"value": 1}, headers=same)
        collision_again = second.post("/v1/events", json=event, headers=same)
        probe_again = third.put("/v1/memories/user/u1/k", json={"value": 1}, headers=same)
        events = second.get("/v1/events", params={"scope": "user", "scope_ref": "u1"})
        value = first.get("/v1/pointers", params={"scope": "user"}).json()["items"][0]
    assert [mine.status_code, collision.status_code, probe.status_code] == [200, 201, 200], \
        collision.text
    assert not any("Idempotent-Replayed" in r.headers for r in (mine, collision, probe))
    assert (mine.json()["version"], probe.json()["version"], value["version"]) == (1, 2, 2)
    for again, original in ((mine_again, mine), (collision_again, collision),
                            (probe_again, probe)):
        assert again.headers["Idempotent-Replayed"] == "true"
        assert (again.status_code, again.json()) == (original.status_code, original.json())
    assert [e["id"] for e in events.json()["items"]] == [collision.json()["id"]]
