"""Once a (scope, scope ref) qualifies — three or more uncompressed events older than the
threshold — the compactor folds *all* its uncompressed events, the recent ones too (the
seed's step 1); a bucket with too few old events is left whole, however many recent ones it
holds. Over HTTP, run by the server's own worker, on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.support.service import Tenant

from .test_api_run import _post_events, _run

OLD = ["We agreed to raise the ROAS target to 4.", "Maria decided to move 20% to Meta.",
       "Acme will renew for $120k."]
NEW = ["Acme asked for a weekly report.", "We decided to pause the Bing campaign."]


def test_a_due_bucket_is_compacted_whole_and_a_young_one_not_at_all(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        old = _post_events(http, "entity", "ent_acme", OLD, days_ago=200)
        new = _post_events(http, "entity", "ent_acme", NEW, days_ago=3)
        _post_events(http, "entity", "ent_young", OLD[:2], days_ago=200)
        _post_events(http, "entity", "ent_young", OLD + NEW, days_ago=10)

        dry = _run(http, dry_run=True)["result"]
        assert (dry["buckets"], dry["events_compressed"], dry["entries_written"]) == (1, 5, 1)
        result = _run(http)["result"]
        assert (result["buckets"], result["compacted_buckets"], result["events_compressed"],
                result["entries_written"]) == (1, 1, 5, 1)

        listed = http.get("/v1/events", params={"scope": "entity", "scope_ref": "ent_acme",
                                                "include_compressed": "true"}).json()["items"]
        assert sorted(e["id"] for e in listed if e["compressed_at"] is not None) == \
            sorted(e["id"] for e in old + new)
        [entry] = http.get("/v1/entries", params={"scope": "entity",
                                                  "scope_ref": "ent_acme"}).json()["items"]
        trace = http.get(f"/v1/compactor/provenance/{entry['id']}").json()
        assert [e["event_id"] for e in trace["events"]] == [e["id"] for e in old + new]
        summary = http.get(f"/v1/entries/{entry['id']}").json()["summary"]
        assert "pause the Bing campaign" in summary  # a recent event's decision is in it

        young = http.get("/v1/events", params={"scope": "entity",
                                               "scope_ref": "ent_young"}).json()["items"]
        assert len(young) == 7 and all(e["compressed_at"] is None for e in young)
        assert http.get("/v1/entries", params={"scope": "entity",
                                               "scope_ref": "ent_young"}).json()["items"] == []
