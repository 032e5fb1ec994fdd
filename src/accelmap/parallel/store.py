"""The SQLite results store of sweeps and portfolios.

One row per task, keyed by the task's stable key (a SHA-256 of its canonical spec, see
`accelmap.parallel.sweep.task_key`). The driver is the only writer: each finished task is
committed in its own transaction as it arrives, in WAL mode, so an interrupted run (Ctrl-C,
a killed driver) leaves every committed row intact and nothing half-written; the next run
skips the keys already done and finishes the rest.

Schema (version 1), documented for users in ``docs/sweeps.md``::

    meta(key TEXT PRIMARY KEY, value TEXT)          -- schema_version, created_at
    results(
        task_key      TEXT PRIMARY KEY,  -- sha256 hex of the canonical task spec
        sweep         TEXT,              -- sweep name (a label; not part of the key)
        network       TEXT,              -- zoo network of the layer, NULL for a lone layer
        layer         TEXT NOT NULL,     -- Problem.name
        repeat        INTEGER NOT NULL,  -- occurrences of the layer in its network
        arch          TEXT NOT NULL,     -- Arch.name (variants carry a suffix)
        model         TEXT NOT NULL,     -- cost model plugin name
        searcher      TEXT NOT NULL,     -- searcher plugin name
        seed_index    INTEGER NOT NULL,  -- replica number within the sweep
        seed          INTEGER NOT NULL,  -- the seed the search ran with
        objective     TEXT NOT NULL,
        budget        INTEGER,           -- evaluations allowed (NULL = searcher default)
        status        TEXT NOT NULL,     -- ok | infeasible | error
        cycles        REAL,              -- best mapping's metrics (NULL unless ok)
        energy_pj     REAL,
        edp           REAL,              -- pJ x cycles
        n_evaluations INTEGER,
        mapping_json  TEXT,              -- best mapping (accelmap mapping-file dict)
        metrics_json  TEXT,              -- best metrics (Metrics.row)
        result_json   TEXT,              -- anything else the task returned
        task_json     TEXT NOT NULL,     -- the canonical task spec that was hashed
        error         TEXT,              -- message of a failed task
        worker        TEXT,              -- host:pid that ran the task
        attempts      INTEGER NOT NULL,  -- runs of this key that reached the store
        started_at    REAL,              -- unix seconds, on the worker
        finished_at   REAL,
        wall_s        REAL,              -- task wall time on the worker
        committed_at  REAL               -- unix seconds, on the driver
    )

A row with status ``ok`` or ``infeasible`` is *done*; an ``error`` row is retried by the
next run and overwritten when that succeeds.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelmap.errors import SpecError

__all__ = [
    "DEFAULT_STORE",
    "SCHEMA_VERSION",
    "DONE_STATUSES",
    "RESULT_COLUMNS",
    "SUMMARY_COLUMNS",
    "ResultStore",
    "BestRow",
    "NetworkTotal",
]

DEFAULT_STORE = "accelmap-results.sqlite"
SCHEMA_VERSION = 1
DONE_STATUSES = ("ok", "infeasible")
_STATUSES = ("ok", "infeasible", "error")

# Column name -> SQL type, in table order.
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("task_key", "TEXT PRIMARY KEY"),
    ("sweep", "TEXT"),
    ("network", "TEXT"),
    ("layer", "TEXT NOT NULL"),
    ("repeat", "INTEGER NOT NULL"),
    ("arch", "TEXT NOT NULL"),
    ("model", "TEXT NOT NULL"),
    ("searcher", "TEXT NOT NULL"),
    ("seed_index", "INTEGER NOT NULL"),
    ("seed", "INTEGER NOT NULL"),
    ("objective", "TEXT NOT NULL"),
    ("budget", "INTEGER"),
    ("status", "TEXT NOT NULL"),
    ("cycles", "REAL"),
    ("energy_pj", "REAL"),
    ("edp", "REAL"),
    ("n_evaluations", "INTEGER"),
    ("mapping_json", "TEXT"),
    ("metrics_json", "TEXT"),
    ("result_json", "TEXT"),
    ("task_json", "TEXT NOT NULL"),
    ("error", "TEXT"),
    ("worker", "TEXT"),
    ("attempts", "INTEGER NOT NULL"),
    ("started_at", "REAL"),
    ("finished_at", "REAL"),
    ("wall_s", "REAL"),
    ("committed_at", "REAL"),
)
RESULT_COLUMNS: tuple[str, ...] = tuple(name for name, _ in _COLUMNS)
# The plain columns a CSV export or a summary shows (no JSON blobs).
SUMMARY_COLUMNS: tuple[str, ...] = (
    "task_key", "sweep", "network", "layer", "repeat", "arch", "model", "searcher",
    "seed_index", "seed", "objective", "budget", "status", "cycles", "energy_pj", "edp",
    "n_evaluations", "error", "worker", "attempts", "wall_s",
)
_INDEXED = ("layer", "arch", "model", "searcher", "seed", "status", "network", "cycles", "energy_pj", "edp")
_METRICS = ("edp", "energy_pj", "cycles")
_JSON_COLUMNS = ("mapping_json", "metrics_json", "result_json", "task_json")


@dataclass(frozen=True, slots=True, kw_only=True)
class BestRow:
    """The best finished task of one (network, layer, arch, model) group."""

    network: str | None
    layer: str
    repeat: int
    arch: str
    model: str
    searcher: str
    seed: int
    cycles: float
    energy_pj: float
    edp: float
    n_tasks: int  # finished tasks (all searchers and seeds) of the group
    task_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkTotal:
    """One network on one arch and model: the sum of its best layers, weighted by repeat.

    Layers run one after another, so cycles and energy add up; the EDP of the network is
    ``energy_pj * cycles`` of the totals (not the sum of per-layer EDPs).
    """

    network: str
    arch: str
    model: str
    n_layers: int  # distinct layers with a finished best
    n_missing: int  # distinct layers in the store with no ok row (infeasible, error)
    cycles: float
    energy_pj: float
    edp: float


class ResultStore:
    """A SQLite file holding one row per task.

    Parameters
    ----------
    path
        The database file (created with its folder when missing). ``":memory:"`` works for
        tests.

    Examples
    --------
    >>> store = ResultStore(":memory:")
    >>> store.done_keys()
    set()
    >>> store.close()
    """

    def __init__(self, path: str | Path = DEFAULT_STORE) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # The driver thread is the only writer; isolation_level=None gives explicit
        # transactions (BEGIN IMMEDIATE ... COMMIT) per result.
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise SpecError(
                f"{self.path}: not an accelmap results store ({exc}); expected a SQLite file "
                "written by `accelmap sweep`, or a new path"
            ) from exc
        # WAL + NORMAL: a committed transaction survives a killed process (only a power
        # loss may drop the last commits), and a commit costs no fsync of the main file.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._create()

    # --- lifecycle --------------------------------------------------------------------
    def _create(self) -> None:
        cols = ",\n    ".join(f"{name} {sqltype}" for name, sqltype in _COLUMNS)
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                c.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise SpecError(
                    f"{self.path}: results store schema_version = {row[0]}; expected "
                    f"{SCHEMA_VERSION}; write to a new --store path or upgrade accelmap"
                )
            c.execute(f"CREATE TABLE IF NOT EXISTS results (\n    {cols}\n)")
            # design-space studies: one row per told trial (its candidate), beside the rows of
            # the layer searches it is made of
            c.execute("CREATE TABLE IF NOT EXISTS dse_trials (study TEXT NOT NULL, trial INTEGER NOT NULL, "
                      "feasible INTEGER NOT NULL, candidate TEXT NOT NULL, committed_at REAL NOT NULL, "
                      "PRIMARY KEY (study, trial))")
            for name in _INDEXED:
                c.execute(f"CREATE INDEX IF NOT EXISTS results_{name} ON results({name})")
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:  # a Ctrl-C may land after COMMIT returned
                c.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------
    def commit(self, row: dict[str, Any]) -> bool:
        """Write one finished task in its own transaction.

        Parameters
        ----------
        row
            Column -> value; JSON columns may hold plain Python data (it is serialised).
            ``task_key``, the label columns and ``status`` are required; ``attempts`` is
            managed here.

        Returns
        -------
        True if the row was written; False if the key was already done (a duplicate
        delivery, e.g. a task retried after its first result landed), which is left as is.
        """
        unknown = sorted(set(row) - set(RESULT_COLUMNS))
        if unknown:
            raise ValueError(f"unknown result columns {unknown}; known: {list(RESULT_COLUMNS)}")
        if row.get("status") not in _STATUSES:
            raise ValueError(f"status = {row.get('status')!r}; expected one of {_STATUSES}")
        values = dict(row)
        for name in _JSON_COLUMNS:
            v = values.get(name)
            if v is not None and not isinstance(v, str):
                values[name] = json.dumps(v, sort_keys=True, default=_json_default)
        for name in _METRICS:
            v = values.get(name)
            if v is not None and not math.isfinite(float(v)):
                values[name] = None
        values["committed_at"] = time.time()
        values["attempts"] = 1
        names = [n for n in RESULT_COLUMNS if n in values]
        placeholders = ", ".join(f":{n}" for n in names)
        # Upsert: a done row is never replaced (exactly once); an error row is replaced by
        # the new outcome, and the attempt count keeps growing.
        updates = ", ".join(f"{n} = excluded.{n}" for n in names if n not in ("task_key", "attempts"))
        sql = (
            f"INSERT INTO results ({', '.join(names)}) VALUES ({placeholders}) "
            f"ON CONFLICT(task_key) DO UPDATE SET {updates}, attempts = results.attempts + 1 "
            f"WHERE results.status NOT IN {DONE_STATUSES!r}"
        )
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            cur = c.execute(sql, values)
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:  # a Ctrl-C may land after COMMIT returned
                c.execute("ROLLBACK")
            raise
        return cur.rowcount > 0

    def commit_trial(self, study: str, trial: int, feasible: bool, candidate: dict[str, Any]) -> None:
        """Write one told trial of a design-space study (``candidate``: its parameters, area,
        network metrics and certified gap) in its own transaction; a trial told again (a
        resumed study redoing it) replaces its row."""
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO dse_trials VALUES (?, ?, ?, ?, ?)",
                      (study, int(trial), int(bool(feasible)),
                       json.dumps(candidate, sort_keys=True, default=_json_default), time.time()))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:  # a Ctrl-C may land after COMMIT returned
                c.execute("ROLLBACK")
            raise

    def trials(self, study: str | None = None) -> list[dict[str, Any]]:
        """The told trials of design-space studies (one, or all), in trial order:
        ``{"study", "trial", "feasible", "candidate"}``."""
        sql = "SELECT study, trial, feasible, candidate FROM dse_trials"
        args: tuple[Any, ...] = ()
        if study is not None:
            sql += " WHERE study = ?"
            args = (study,)
        return [{"study": r[0], "trial": int(r[1]), "feasible": bool(r[2]), "candidate": json.loads(r[3])}
                for r in self._conn.execute(sql + " ORDER BY study, trial", args).fetchall()]

    # --- reading ----------------------------------------------------------------------
    def done_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        """Keys whose row is done (status ok or infeasible), optionally among ``keys``."""
        rows = self._conn.execute(
            f"SELECT task_key FROM results WHERE status IN {DONE_STATUSES!r}"
        ).fetchall()
        done = {r[0] for r in rows}
        return done if keys is None else done & set(keys)

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        return int(self._conn.execute("SELECT COUNT(*) FROM results WHERE status = ?", (status,)).fetchone()[0])

    def get(self, task_key: str) -> dict[str, Any] | None:
        """One row with its JSON columns decoded, or None."""
        r = self._conn.execute("SELECT * FROM results WHERE task_key = ?", (task_key,)).fetchone()
        return None if r is None else _decode(r)

    def rows(self, *, status: str | None = None, columns: tuple[str, ...] | None = None) -> Iterator[dict[str, Any]]:
        """Every row (JSON columns decoded), in commit order; optionally one status."""
        cols = columns or RESULT_COLUMNS
        bad = sorted(set(cols) - set(RESULT_COLUMNS))
        if bad:
            raise ValueError(f"unknown result columns {bad}")
        sql = f"SELECT {', '.join(cols)} FROM results"
        args: tuple[Any, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            args = (status,)
        sql += " ORDER BY committed_at, task_key"
        for r in self._conn.execute(sql, args):
            yield _decode(r)

    # --- summaries --------------------------------------------------------------------
    def best_per_layer(self, metric: str = "edp") -> list[BestRow]:
        """The best ok row of every (network, layer, arch, model) over searchers and seeds.

        Parameters
        ----------
        metric
            ``"edp"``, ``"energy_pj"`` or ``"cycles"`` (lower is better).
        """
        _check_metric(metric)
        sql = f"""
            WITH ranked AS (
                SELECT *, ROW_NUMBER() OVER (
                    PARTITION BY IFNULL(network, ''), layer, arch, model
                    ORDER BY {metric} ASC, task_key ASC) AS rk,
                    COUNT(*) OVER (PARTITION BY IFNULL(network, ''), layer, arch, model) AS n_tasks,
                    MIN(rowid) OVER (PARTITION BY IFNULL(network, ''), layer) AS first_seen
                FROM results WHERE status = 'ok' AND {metric} IS NOT NULL
            )
            SELECT network, layer, repeat, arch, model, searcher, seed, cycles, energy_pj, edp,
                   n_tasks, task_key
            FROM ranked WHERE rk = 1
            ORDER BY IFNULL(network, ''), arch, model, first_seen, layer
        """
        return [BestRow(**dict(r)) for r in self._conn.execute(sql)]

    def network_totals(self, metric: str = "edp") -> list[NetworkTotal]:
        """Per (network, arch, model): sums of the best layers, each times its repeat."""
        best = self.best_per_layer(metric)
        totals: dict[tuple[str, str, str], dict[str, Any]] = {}
        for b in best:
            if b.network is None:
                continue
            t = totals.setdefault((b.network, b.arch, b.model), {"layers": set(), "cycles": 0.0, "energy_pj": 0.0})
            t["layers"].add(b.layer)
            t["cycles"] += b.repeat * b.cycles
            t["energy_pj"] += b.repeat * b.energy_pj
        seen = self._conn.execute(
            "SELECT network, arch, model, layer FROM results WHERE network IS NOT NULL "
            "GROUP BY network, arch, model, layer"
        ).fetchall()
        all_layers: dict[tuple[str, str, str], set[str]] = {}
        for r in seen:
            all_layers.setdefault((r[0], r[1], r[2]), set()).add(r[3])
        out = []
        for key in sorted(set(all_layers) | set(totals)):
            t = totals.get(key, {"layers": set(), "cycles": 0.0, "energy_pj": 0.0})
            n_missing = len(all_layers.get(key, set()) - t["layers"])
            out.append(NetworkTotal(
                network=key[0], arch=key[1], model=key[2], n_layers=len(t["layers"]),
                n_missing=n_missing, cycles=t["cycles"], energy_pj=t["energy_pj"],
                edp=t["cycles"] * t["energy_pj"],
            ))
        return out


def _check_metric(metric: str) -> None:
    if metric not in _METRICS:
        raise SpecError(f"metric {metric!r}; expected one of {list(_METRICS)}")


def _decode(r: sqlite3.Row) -> dict[str, Any]:
    d = dict(r)
    for name in _JSON_COLUMNS:
        if d.get(name) is not None:
            d[name] = json.loads(d[name])
    return d


def _json_default(obj: Any) -> Any:
    """numpy scalars and arrays, sets and enums inside result payloads."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "value"):
        return obj.value
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
