from __future__ import annotations

import sqlite3

import pytest

from accelmap.errors import SpecError
from accelmap.parallel.store import RESULT_COLUMNS, ResultStore


def _row(key: str, *, layer: str = "L1", arch: str = "A", status: str = "ok", edp: float = 10.0,
         network: str | None = "net", repeat: int = 1, searcher: str = "random", model: str = "loopnest",
         cycles: float = 2.0, energy_pj: float = 5.0) -> dict:
    return {
        "task_key": key, "sweep": "s", "network": network, "layer": layer, "repeat": repeat,
        "arch": arch, "model": model, "searcher": searcher, "seed_index": 0, "seed": 7,
        "objective": "edp", "budget": 100, "status": status, "cycles": cycles,
        "energy_pj": energy_pj, "edp": edp, "task_json": {"k": key},
        "mapping_json": {"levels": [1, 2]}, "metrics_json": {"edp": edp},
    }


def test_schema_and_wal(tmp_path):
    path = tmp_path / "sub" / "r.sqlite"
    with ResultStore(path) as store:
        assert store.count() == 0
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in conn.execute("PRAGMA table_info(results)")]
    assert tuple(cols) == RESULT_COLUMNS
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(results)")}
    for name in ("layer", "arch", "model", "searcher", "seed", "cycles", "energy_pj", "edp", "status"):
        assert f"results_{name}" in indexes
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    conn.close()


def test_commit_roundtrip_and_reopen(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        assert store.commit(_row("a"))
    with ResultStore(path) as store:
        row = store.get("a")
        assert row["mapping_json"] == {"levels": [1, 2]}
        assert row["task_json"] == {"k": "a"}
        assert row["attempts"] == 1 and row["committed_at"] > 0
        assert store.done_keys() == {"a"}
        assert store.get("missing") is None


def test_done_row_is_never_replaced(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        assert store.commit(_row("a", edp=1.0))
        assert not store.commit(_row("a", edp=2.0))
        assert store.get("a")["edp"] == 1.0
        assert store.count() == 1


def test_error_row_is_retried_and_replaced(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.commit({**_row("a"), "status": "error", "error": "boom", "edp": None})
        assert store.done_keys() == set()
        assert store.commit(_row("a", edp=3.0))
        row = store.get("a")
        assert row["status"] == "ok" and row["edp"] == 3.0 and row["attempts"] == 2
        assert store.done_keys() == {"a"}


def test_infinite_metrics_stored_as_null(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.commit({**_row("a"), "status": "infeasible", "edp": float("inf")})
        assert store.get("a")["edp"] is None
        assert store.done_keys() == {"a"}


def test_bad_rows_rejected(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError, match="unknown result columns"):
            store.commit({**_row("a"), "bogus": 1})
        with pytest.raises(ValueError, match="status"):
            store.commit({**_row("a"), "status": "weird"})
        assert store.count() == 0


def test_not_a_store(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello, not a database" * 100)
    with pytest.raises(SpecError, match="not an accelmap results store"):
        ResultStore(bad)


def test_best_per_layer_and_network_totals(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.commit(_row("1", layer="L1", edp=10.0, cycles=2, energy_pj=5, searcher="random"))
        store.commit(_row("2", layer="L1", edp=6.0, cycles=2, energy_pj=3, searcher="genetic"))
        store.commit(_row("3", layer="L2", edp=8.0, cycles=4, energy_pj=2, repeat=3))
        store.commit(_row("4", layer="L3", status="error", edp=None))
        store.commit(_row("5", layer="L1", arch="B", edp=1.0, cycles=1, energy_pj=1))
        store.commit(_row("6", layer="solo", network=None, edp=1.0))
        best = store.best_per_layer("edp")
        by = {(b.network, b.layer, b.arch): b for b in best}
        assert by[("net", "L1", "A")].searcher == "genetic"
        assert by[("net", "L1", "A")].n_tasks == 2
        assert by[("net", "L2", "A")].repeat == 3
        assert ("net", "L3", "A") not in by
        assert (None, "solo", "A") in by
        assert [b.layer for b in best if b.network == "net" and b.arch == "A"] == ["L1", "L2"]
        totals = {(t.network, t.arch): t for t in store.network_totals("edp")}
        ta = totals[("net", "A")]
        # L1 best (2 cycles, 3 pJ) + 3 x L2 (4 cycles, 2 pJ)
        assert ta.cycles == 2 + 3 * 4 and ta.energy_pj == 3 + 3 * 2
        assert ta.edp == ta.cycles * ta.energy_pj
        assert ta.n_layers == 2 and ta.n_missing == 1
        assert totals[("net", "B")].n_layers == 1
        # by energy the random row (5 pJ) loses to genetic (3 pJ) as well
        assert {b.searcher for b in store.best_per_layer("energy_pj") if b.layer == "L1" and b.arch == "A"} == {"genetic"}
        with pytest.raises(SpecError):
            store.best_per_layer("speed")
