"""Experiments over the API: bad input named by field, sticky assignment at the storefront,
events counted in the visitor's variant, stop and promote."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.server.conftest import auth


@pytest.fixture(scope="module")
def two_versions(served):
    """Collection ``ab`` with versions ``plain`` (published) and ``mix``; ``other`` with ``o1``."""
    client, ws, keys = served
    from vismerch.service.collections import create_collection

    admin = auth(keys["admin"])
    for coll, names in (("ab", ("plain", "mix")), ("other", ("o1",))):
        create_collection(ws, coll, where="true")
        for name in names:
            r = client.post(f"/api/v1/collections/{coll}/versions", json={"name": name,
                            "mode": "flow" if name == "plain" else "mix"}, headers=admin)
            assert r.status_code == 201, r.text
    mix = client.get("/api/v1/collections/ab/versions/mix", headers=admin)
    ids, etag = [slot["id"] for slot in mix.json()["items"]], mix.headers["ETag"]
    r = client.put("/api/v1/collections/ab/versions/mix", json={"ids": ids[::-1]},
                   headers={**admin, "If-Match": etag})  # make the two orders differ for sure
    assert r.status_code == 200, r.text
    state = client.get("/api/v1/collections/ab/versions", headers=admin).headers["ETag"]
    r = client.post("/api/v1/collections/ab/publish", json={"version": "plain"},
                    headers={**admin, "If-Match": state})
    assert r.status_code == 200, r.text
    return client, ws, keys


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"collection": "ab", "variants": ["plain", "o1"]}, 422, "variants"),
    ({"collection": "ab", "variants": ["plain", "mix"], "split": [60, 30]}, 422, "split"),
    ({"collection": "ab", "variants": ["plain", "mix"], "split": [50]}, 422, "split"),
    ({"collection": "ab", "variants": ["plain", "mix"], "metric": "happiness"}, 422, "metric"),
    ({"collection": "ab", "variants": ["plain"]}, 422, "variants"),
    ({"collection": "ab", "variants": ["plain", "mix"], "guardrails": ["nope"]}, 422, "guardrails"),
    ({"collection": "ab", "variants": ["plain", "mix"], "ends_at": "2000-01-01T00:00:00Z"}, 422, "ends_at"),
])
def test_bad_experiments_get_a_4xx_naming_the_field(two_versions, body, status, field):
    client, _, keys = two_versions
    r = client.post("/api/v1/experiments", json=body, headers=auth(keys["merchandiser"]))
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field


def _page(client, key, visitor=None, header=False):
    url = "/api/v1/storefront/collections/ab?columns=4&limit=8"
    headers = auth(key)
    if visitor and header:
        headers["X-Visitor-Id"] = visitor
    elif visitor:
        url += f"&visitor={visitor}"
    r = client.get(url, headers=headers)
    assert r.status_code == 200, r.text
    return r


def test_an_experiment_assigns_visitors_stickily_and_promotes_the_winner(two_versions):
    client, ws, keys = two_versions
    sf, merch, publisher = keys["storefront"], auth(keys["merchandiser"]), auth(keys["publisher"])
    live = _page(client, sf).json()
    assert live["experiment"] is None and live["version"] == "plain"
    r = client.post("/api/v1/experiments", json={"collection": "ab", "variants": ["plain", "mix"],
                                                 "metric": "ctr"}, headers=merch)
    assert r.status_code == 201, r.text
    exp = r.json()
    again = client.post("/api/v1/experiments", json={"collection": "ab", "variants": ["plain", "mix"]},
                        headers=merch)
    assert again.status_code == 409  # one running experiment per collection
    seen = {}
    for k in range(40):
        first = _page(client, sf, f"shopper-{k}")
        body = first.json()
        assert body["experiment"] == exp["id"] and body["variant"] in ("plain", "mix")
        assert body["version"] == body["variant"]
        assert "private" in first.headers["Cache-Control"]
        for _ in range(2):  # the same variant on every request, by query or header
            assert _page(client, sf, f"shopper-{k}", header=_ % 2 == 1).json()["variant"] == body["variant"]
        seen[f"shopper-{k}"] = body
    assert {b["variant"] for b in seen.values()} == {"plain", "mix"}
    assert _page(client, sf).json()["version"] == "plain"  # no visitor id: the live version
    # a variant in a running experiment may not change
    etag = client.get("/api/v1/collections/ab/versions/mix", headers=merch).headers["ETag"]
    r = client.put("/api/v1/collections/ab/versions/mix", json={"ids": [s["id"] for s in live["items"]]},
                   headers={**merch, "If-Match": etag})
    assert r.status_code == 409, r.text
    # events, as the storefront sends them with the answer's experiment and variant
    now = datetime.now(UTC).isoformat()
    events = []
    for visitor, body in seen.items():
        for slot in body["items"]:
            events.append({"event_id": f"x-{visitor}-{slot['position']}", "type": "impression", "ts": now,
                           "visitor": visitor, "collection": "ab", "version_id": body["version_id"],
                           "position": slot["position"], "columns": 4, "product_id": slot["id"],
                           "experiment": body["experiment"], "variant": body["variant"]})
        if body["variant"] == "mix" or visitor.endswith("0"):
            slot = body["items"][0]
            events.append({"event_id": f"c-{visitor}", "type": "click", "ts": now, "visitor": visitor,
                           "collection": "ab", "version_id": body["version_id"], "position": 1,
                           "product_id": slot["id"], "experiment": body["experiment"],
                           "variant": body["variant"]})
    for k in range(0, len(events), 200):
        r = client.post("/api/v1/events", json={"events": events[k:k + 200]}, headers=auth(sf))
        assert r.json()["refused"] == [], r.text
    res = client.get(f"/api/v1/experiments/{exp['id']}/results", headers=auth(keys["viewer"]))
    assert res.status_code == 200, res.text
    out = res.json()
    by_variant = {v["variant"]: v for v in out["primary"]["variants"]}
    assert sum(v["n"] for v in by_variant.values()) == 40
    assert by_variant["mix"]["n"] == sum(1 for b in seen.values() if b["variant"] == "mix")
    assert out["data_quality"]["mislabelled"] == 0
    assert out["status"] in ("not_yet_conclusive", "winner", "no_difference")
    assert out["timeline"] and out["timeline"][-1]["variants"]
    # promoting needs a publisher; then new visitors see the winner, and the experiment is over
    assert client.post(f"/api/v1/experiments/{exp['id']}/promote", json={"variant": "mix"},
                       headers=merch).status_code == 403
    r = client.post(f"/api/v1/experiments/{exp['id']}/promote", json={"variant": "mix"}, headers=publisher)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "promoted" and r.json()["winner"] == "mix"
    after = _page(client, sf, "someone-new").json()
    assert after["experiment"] is None and after["version"] == "mix"
    audit = ws.store.db.execute("SELECT action FROM audit_log WHERE action LIKE '%promote%'").fetchall()
    assert audit, "promote is not audited"


def test_stopping_restores_the_live_version_for_everyone(two_versions):
    client, _, keys = two_versions
    merch = auth(keys["merchandiser"])
    live = _page(client, keys["storefront"]).json()["version"]
    other = "plain" if live != "plain" else "mix"
    r = client.post("/api/v1/experiments", json={"collection": "ab", "variants": [live, other],
                                                 "split": [30, 70]}, headers=merch)
    assert r.status_code == 201, r.text
    exp = r.json()
    variants = {_page(client, keys["storefront"], f"v{k}").json()["variant"] for k in range(60)}
    assert len(variants) == 2
    r = client.delete("/api/v1/collections/ab", headers=auth(keys["admin"]))
    assert r.status_code == 409 and "experiment" in r.text  # its versions are the variants
    assert client.post(f"/api/v1/experiments/{exp['id']}/stop", headers=merch).json()["status"] == "stopped"
    assert {_page(client, keys["storefront"], f"v{k}").json()["version"] for k in range(30)} == {live}
    assert client.post(f"/api/v1/experiments/{exp['id']}/stop", headers=merch).status_code == 409
    again = client.post("/api/v1/experiments", json={"collection": "ab", "variants": [live, other]},
                        headers=merch).json()  # a second one may start once the first stopped
    assert client.post(f"/api/v1/experiments/{again['id']}/stop", headers=merch).status_code == 200
    listed = client.get("/api/v1/experiments?collection=ab&limit=1", headers=auth(keys["viewer"])).json()
    assert len(listed["items"]) == 1 and listed["next_cursor"]  # two experiments or more, a page of one
    rest = client.get(f"/api/v1/experiments?collection=ab&cursor={listed['next_cursor']}",
                      headers=auth(keys["viewer"])).json()
    both = [(e["id"], e["status"]) for e in listed["items"] + rest["items"]][-2:]
    assert both == [(exp["id"], "stopped"), (again["id"], "stopped")]


def test_cli_create_checks_like_the_api_and_starts_one(two_versions, capsys):
    import json

    from vismerch.cli import main
    from vismerch.service.collections import create_collection
    from vismerch.service.versions import save_draft

    _, ws, _ = two_versions
    create_collection(ws, "cli", where="true")
    for name in ("c1", "c2"):
        save_draft(ws, "cli", name, mode="flow")
    store = str(ws.store.path)
    capsys.readouterr()
    args = ["experiments", "create", store, "-c", "cli", "--variants", "c1,c2"]
    assert main([*args, "--holdout", "0.7"]) == 2
    assert "holdout" in capsys.readouterr().err
    assert main([*args, "--split", "30,70", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in made["variants"]] == ["c1", "c2"] and made["status"] == "running"
    assert [v["weight"] for v in made["variants"]] == [30.0, 70.0]
