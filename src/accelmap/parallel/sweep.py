"""Sweeps: the cross product of workloads x architectures x cost models x searchers x
seeds, one search per task, results committed to a `ResultStore` as they finish.

A sweep file is strict YAML (``version: 1``; an unknown key is an error naming its path and
the accepted keys). ``docs/sweeps.md`` is the user guide; in short::

    version: 1
    name: resnet-eyeriss             # a label stored with every row
    workloads:
      - network: resnet50            # every layer of a zoo network (repeat counts kept)
        layers: [conv1, conv3_1]     # optional subset (names or aliases)
      - layer: vgg16/conv4_2         # one zoo layer
      - file: layers/my_conv.yaml    # a workload file (relative to this file)
    architectures:
      - preset: eyeriss
        variants:                    # optional: cross product of the lists below
          pe_array:
            - {fanout_x: 16, fanout_y: 16}        # level: defaults to the PE array level
          buffers:
            - {level: GLB, capacity_words: [65536, 131072]}
      - file: archs/my_arch.yaml
    models:
      - loopnest
      - {name: systolic, options: {dram_window: exact}}   # a model's constructor options
    searchers:
      - random
      - {name: genetic, options: {population: 64}}
    seeds: 2                         # replicas; or an explicit list of seeds
    seed: 0                          # root of the SeedSequence the replica seeds come from
    budget: 20000                    # evaluations per search
    objective: edp
    time_limit_s: null
    constraints: [dataflow.yaml]     # optional constraint files, applied to every task
    allow_padding: false             # imperfect factorization
    early_stop: null                 # evaluations without improvement before a search stops

Every task carries frozen specs (`Problem`, `Arch`), plugin *names* and a seed; its key is
the SHA-256 of its canonical spec, so a re-run skips what the store already holds.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.arch.spec import Arch, StorageLevel
from accelmap.errors import SpecError
from accelmap.parallel.backend import Backend, Outcome, SerialBackend
from accelmap.parallel.store import ResultStore
from accelmap.workloads.problem import Problem

__all__ = [
    "SearchTask",
    "Sweep",
    "SweepSummary",
    "canonical",
    "task_key",
    "spawn_seeds",
    "load_sweep",
    "parse_sweep",
    "arch_variants",
    "run_tasks",
    "run_sweep",
    "run_search_task",
    "search_kwargs",
    "payload_from_result",
    "result_row",
]

# Bump when the meaning of a task spec changes, so old rows are not mistaken for new ones.
KEY_VERSION = 1
_PAYLOAD_COLUMNS = {
    "cycles": "cycles",
    "energy_pj": "energy_pj",
    "edp": "edp",
    "n_evaluations": "n_evaluations",
    "mapping": "mapping_json",
    "metrics": "metrics_json",
    "result": "result_json",
}


# --- tasks ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class SearchTask:
    """One search: a layer on an arch with one cost model, searcher and seed.

    Everything a worker needs travels inside (frozen specs, plugin names, the seed), so a
    task runs the same on any node. ``network``, ``seed_index`` and ``sweep`` are labels
    for the store; ``network`` is part of the key (the same layer in two networks counts
    toward two totals), ``seed_index`` and ``sweep`` are not.
    """

    problem: Problem
    arch: Arch
    model: str = "loopnest"
    # Keyword arguments of the cost model's constructor (`accelmap._registry.build_costmodel`);
    # part of the key only when given, so tasks without options keep their keys.
    model_options: dict[str, Any] = field(default_factory=dict, hash=False)
    searcher: str = "random"
    searcher_options: dict[str, Any] = field(default_factory=dict, hash=False)
    seed: int = 0
    budget: int | None = None
    objective: str = "edp"
    time_limit_s: float | None = None
    # Mapping constraints handed to the search as given (frozen specs or plain data).
    constraints: Any = field(default=None, hash=False)
    allow_padding: bool = False
    early_stop: int | None = None
    network: str | None = None
    seed_index: int = 0
    sweep: str = ""
    # The key, computed once (hashing the canonical specs costs about half a millisecond).
    _key: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", task_key(self))

    @property
    def key(self) -> str:
        """SHA-256 (hex) of the canonical spec; see :func:`task_key`."""
        return self._key

    @property
    def model_label(self) -> str:
        """The model's name, with its options when it has any (``systolic[dram_window=exact]``):
        the ``model`` column of the store, so that two option sets of one model stay apart."""
        if not self.model_options:
            return self.model
        opts = ",".join(f"{k}={self.model_options[k]}" for k in sorted(self.model_options))
        return f"{self.model}[{opts}]"

    def spec(self) -> dict[str, Any]:
        """The canonical, JSON-ready spec that the key hashes."""
        extra = {"model_options": canonical(self.model_options)} if self.model_options else {}
        return {
            **extra,
            "key_version": KEY_VERSION,
            "problem": canonical(self.problem),
            "arch": canonical(self.arch),
            "model": self.model,
            "searcher": self.searcher,
            "searcher_options": canonical(self.searcher_options),
            "seed": int(self.seed),
            "budget": self.budget,
            "objective": self.objective,
            "time_limit_s": self.time_limit_s,
            "constraints": canonical(self.constraints),
            "allow_padding": self.allow_padding,
            "early_stop": self.early_stop,
            "network": self.network,
        }

    def describe(self) -> str:
        net = f"{self.network}/" if self.network else ""
        return f"{net}{self.problem.name} on {self.arch.name} [{self.model_label}, {self.searcher}, seed {self.seed}]"


def canonical(obj: Any) -> Any:
    """A JSON-ready form of a spec that is equal for equal specs, on any machine.

    Dataclasses become ``{"__type__": name, field: value}`` over their init fields (derived
    arrays and fields marked ``metadata={"key": False}`` are left out), enums their value, sets sorted lists, dicts key-sorted.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"__type__": type(obj).__name__}
        for f in dataclasses.fields(obj):
            if f.init and f.metadata.get("key", True):
                out[f.name] = canonical(getattr(obj, f.name))
        return out
    if isinstance(obj, enum.Enum):
        return canonical(obj.value)
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (set, frozenset)):
        return sorted((canonical(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"cannot put a {type(obj).__name__} into a task spec: {obj!r}")


def task_key(task: SearchTask) -> str:
    """SHA-256 (hex) of the task's canonical spec: stable across runs and machines."""
    text = json.dumps(task.spec(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def spawn_seeds(root: int, n: int) -> tuple[int, ...]:
    """``n`` independent 32-bit seeds spawned from ``SeedSequence(root)``.

    Child ``i`` depends only on ``root`` and ``i`` (not on ``n``), so adding replicas to a
    sweep keeps the seeds, and the keys, of the ones already run.
    """
    children = np.random.SeedSequence(root).spawn(n)
    return tuple(int(c.generate_state(1, dtype=np.uint32)[0]) for c in children)


# --- the sweep spec -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """A resolved sweep: the lists whose cross product is the task list.

    ``workloads`` holds ``(network or None, Problem)`` pairs; ``searchers`` holds
    ``(name, options)`` pairs; ``model_options[i]``, when given, are the constructor options
    of ``models[i]`` (empty: none for any model).
    """

    name: str = "sweep"
    workloads: tuple[tuple[str | None, Problem], ...]
    archs: tuple[Arch, ...]
    models: tuple[str, ...] = ("loopnest",)
    model_options: tuple[dict[str, Any], ...] = ()
    searchers: tuple[tuple[str, dict[str, Any]], ...] = (("random", {}),)
    seeds: tuple[int, ...] = (0,)
    budget: int | None = None
    objective: str = "edp"
    time_limit_s: float | None = None
    # Constraint files (absolute paths) applied to every task, read on the driver.
    constraint_files: tuple[str, ...] = ()
    allow_padding: bool = False
    early_stop: int | None = None

    def __post_init__(self) -> None:
        for key in ("workloads", "archs", "models", "searchers", "seeds"):
            if not getattr(self, key):
                raise SpecError(f"sweep {self.name}: {key} is empty; expected at least one entry")
        if self.model_options and len(self.model_options) != len(self.models):
            raise SpecError(f"sweep {self.name}: {len(self.model_options)} model option sets for "
                            f"{len(self.models)} models; expected one per model (or none)")

    @property
    def n_tasks(self) -> int:
        return len(self.workloads) * len(self.archs) * len(self.models) * len(self.searchers) * len(self.seeds)

    def tasks(self) -> list[SearchTask]:
        """Every task, workload-major (a network's layers stay together), no duplicates."""
        out: list[SearchTask] = []
        seen: set[str] = set()
        loaded: dict[tuple[Problem, Arch], Any] = {}
        models = list(zip(self.models, self.model_options or [{}] * len(self.models), strict=True))
        for (network, problem), arch, (model, model_opts), (searcher, options), (si, seed) in itertools.product(
            self.workloads, self.archs, models, self.searchers, enumerate(self.seeds)
        ):
            constraints = None
            if self.constraint_files:
                if (problem, arch) not in loaded:
                    from accelmap.search.api import load_constraints_any

                    c = load_constraints_any(list(self.constraint_files), arch, problem)
                    if c is not None:
                        # The label goes into the key: file names, not absolute paths, so
                        # that moving the sweep's folder keeps the keys.
                        c = dataclasses.replace(c, source=" + ".join(Path(f).name for f in self.constraint_files))
                    loaded[problem, arch] = c
                constraints = loaded[problem, arch]
            task = SearchTask(
                problem=problem, arch=arch, model=model, model_options=dict(model_opts), searcher=searcher,
                searcher_options=dict(options), seed=seed, budget=self.budget,
                objective=self.objective, time_limit_s=self.time_limit_s, network=network,
                constraints=constraints, allow_padding=self.allow_padding,
                early_stop=self.early_stop, seed_index=si, sweep=self.name,
            )
            k = task.key
            if k not in seen:
                seen.add(k)
                out.append(task)
        return out


_TOP_KEYS = ("version", "name", "workloads", "architectures", "models", "searchers", "seeds",
             "seed", "budget", "objective", "time_limit_s", "constraints", "allow_padding",
             "early_stop")


def load_sweep(path: str | Path) -> Sweep:
    """Read and resolve a sweep file (relative file paths inside are relative to it)."""
    import yaml

    p = Path(path)
    text = read_text(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{p}: not valid YAML: {exc}") from exc
    return parse_sweep(data, source=str(p), base_dir=p.parent)


def parse_sweep(data: Any, *, source: str = "<sweep>", base_dir: str | Path = ".") -> Sweep:
    """Validate a sweep document (already parsed YAML) and resolve names and files.

    Every error is a `SpecError` naming ``source`` and the key path, what was found and what
    is expected (the shared `accelmap._schema` layer).
    """
    base = Path(base_dir)
    top_where = f"{source}: "
    top = schema.check_keys(data, _TOP_KEYS, top_where, "a sweep file",
                            required=("version", "workloads", "architectures"))
    if top["version"] != 1 or isinstance(top["version"], bool):
        raise SpecError(f"{source}: version = {top['version']!r}; expected 1")
    name = schema.name(top, "name", top_where, default=Path(source).stem if source != "<sweep>" else "sweep")

    workloads: list[tuple[str | None, Problem]] = []
    for i, item in enumerate(schema.nonempty_list(top, "workloads", top_where, "workloads")):
        workloads += _workload(item, f"{source}: workloads[{i}]", base)
    archs: list[Arch] = []
    for i, item in enumerate(schema.nonempty_list(top, "architectures", top_where, "architectures")):
        archs += _architecture(item, f"{source}: architectures[{i}]", base)
    names = [a.name for a in archs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(
            f"{source}: architectures: names {dup} occur more than once; rows are labelled by "
            "arch name, so give each entry a distinct `name:`"
        )

    from accelmap._registry import costmodels, searchers

    raw_models = (schema.nonempty_list(top, "models", top_where, "cost model names")
                  if "models" in top else ["loopnest"])
    models: list[str] = []
    model_options: list[dict[str, Any]] = []
    for i, m in enumerate(raw_models):
        models_where = f"{source}: models[{i}]"
        mopts: dict[str, Any] = {}
        if isinstance(m, dict):
            m = schema.check_keys(m, ("name", "options"), models_where, "a cost model", required=("name",))
            mopts = dict(schema.mapping(m, "options", models_where, "option: value"))
            m = m["name"]
            name_where = schema.join(models_where, "name")
        else:
            name_where = models_where
        models.append(schema.plugin_value(m, name_where, costmodels.names(), "cost model"))
        if mopts:
            from accelmap._registry import build_costmodel

            # built once here, so a bad option fails now rather than in every task
            build_costmodel(models[-1], mopts, where=f"{schema.join(models_where, 'options')}: ")
        model_options.append(mopts)
    searcher_list: list[tuple[str, dict[str, Any]]] = []
    raw_searchers = (schema.nonempty_list(top, "searchers", top_where, "searchers")
                     if "searchers" in top else ["random"])
    for i, s in enumerate(raw_searchers):
        where = f"{source}: searchers[{i}]"
        if isinstance(s, dict):
            s = schema.check_keys(s, ("name", "options"), where, "a searcher", required=("name",))
            opts = schema.mapping(s, "options", where, "option: value")
            sname = schema.plugin_value(s["name"], schema.join(where, "name"), searchers.names(), "searcher")
            _check_searcher_options(sname, opts, schema.join(where, "options"))
            searcher_list.append((sname, dict(opts)))
        else:
            searcher_list.append((schema.plugin_value(s, where, searchers.names(), "searcher"), {}))

    root = schema.integer(top, "seed", top_where, default=0, minimum=0, note="the SeedSequence root")
    seeds_raw = top.get("seeds", 1)
    if isinstance(seeds_raw, int) and not isinstance(seeds_raw, bool):
        if seeds_raw < 1:
            raise SpecError(f"{source}: seeds = {seeds_raw!r}; expected an int >= 1 or a list of seeds")
        seeds = spawn_seeds(root, seeds_raw)
    elif isinstance(seeds_raw, list) and seeds_raw and all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**32 for s in seeds_raw
    ):
        if "seed" in top:
            raise SpecError(f"{source}: give `seeds` as a count with `seed`, or as an explicit list without `seed`")
        seeds = tuple(seeds_raw)
    else:
        raise SpecError(
            f"{source}: seeds = {seeds_raw!r}; expected a number of replicas (int >= 1) or a "
            "non-empty list of explicit seeds (ints in [0, 2**32))"
        )
    budget = schema.integer(top, "budget", top_where, default=None, nullable=True,
                            null_means="no evaluation budget", note="evaluations per search")
    time_limit_s = schema.number(top, "time_limit_s", top_where, default=None, minimum=0, strict=True,
                                 nullable=True, null_means="no time limit")
    objective = schema.name(top, "objective", top_where, default="edp", note="such as edp, energy, cycles")
    _check_objective(objective, f"{source}: objective")
    constraint_files = []
    for f in schema.names(top, "constraints", top_where, "constraint file paths", default=[],
                          single="a constraint file path"):
        fp = base / f
        if not fp.is_file():
            raise SpecError(f"{source}: constraints: {fp} does not exist (paths are relative to the sweep file)")
        constraint_files.append(str(fp.resolve()))
    allow_padding = schema.boolean(top, "allow_padding", top_where, default=False)
    if allow_padding:
        from accelmap.search.api import refuse_padding

        for m in models:
            try:
                refuse_padding(costmodels.get(m), m)
            except SpecError as exc:
                raise SpecError(f"{source}: allow_padding: {exc}; set allow_padding: false or list only "
                                "models that take it") from None
    early_stop = schema.integer(top, "early_stop", top_where, default=None, nullable=True,
                                null_means="no early stop", note="evaluations without improvement")
    return Sweep(
        name=name, workloads=tuple(workloads), archs=tuple(archs), models=tuple(models),
        model_options=tuple(model_options) if any(model_options) else (),
        searchers=tuple(searcher_list), seeds=seeds, budget=budget, objective=objective,
        time_limit_s=None if time_limit_s is None else float(time_limit_s),
        constraint_files=tuple(constraint_files), allow_padding=allow_padding, early_stop=early_stop,
    )


def _check_searcher_options(name: str, options: dict[str, Any], where: str) -> None:
    """Unknown searcher options fail here, once, rather than in every task."""
    import inspect

    from accelmap._registry import searchers

    if not options:
        return
    try:
        cls = searchers.get(name)
    except LookupError as exc:
        raise SpecError(f"{where}: {exc}") from exc
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    # n_objectives, seed and budget_hint are set by the search driver, not by users
    accepted = sorted(n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
                      and n not in ("n_objectives", "seed", "budget_hint"))
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise SpecError(f"{where}: searcher {name!r} has no option(s) {unknown}; its options: "
                        f"{', '.join(accepted) or '(none)'}")


def _check_objective(objective: str, where: str) -> None:
    try:
        from accelmap.search.objectives import parse_objective
    except ImportError:  # pragma: no cover - search not installed in this tree
        return
    try:
        parse_objective(objective)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from exc


# Loaders are looked up at call time so that `parallel` imports nothing heavy up front.
def _workload(item: Any, where: str, base: Path) -> list[tuple[str | None, Problem]]:
    if not isinstance(item, dict) or len(set(item) & {"network", "layer", "file"}) != 1:
        raise SpecError(
            f"{where}: {item!r}; expected exactly one of {{network: NAME[, layers: [...]]}}, "
            "{layer: NETWORK/LAYER}, {file: PATH}"
        )
    try:
        if "network" in item:
            from accelmap.workloads.zoo import network

            d = schema.check_keys(item, ("network", "layers"), where, "a network workload")
            net = network(schema.name(d, "network", where, default=schema.REQUIRED))
            if "layers" in d:
                wanted = schema.nonempty_list(d, "layers", where, "layer names or aliases")
                return [(net.name, net.layer(str(n))) for n in wanted]
            return [(net.name, p) for p in net.layers]
        if "layer" in item:
            from accelmap.workloads.zoo import layer

            d = schema.check_keys(item, ("layer",), where, "a layer workload")
            return [(None, layer(schema.name(d, "layer", where, default=schema.REQUIRED)))]
        d = schema.check_keys(item, ("file",), where, "a workload file")
        from accelmap.workloads.io import load_problem

        loaded = load_problem(base / schema.name(d, "file", where, default=schema.REQUIRED))
    except SpecError:
        raise
    except LookupError as exc:  # unknown zoo names: UnknownPluginError
        raise SpecError(f"{where}: {exc}") from exc
    problems = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
    return [(None, p) for p in problems]


def _architecture(item: Any, where: str, base: Path) -> list[Arch]:
    d = schema.check_keys(item, ("preset", "file", "name", "variants"), where, "an architecture")
    if len(set(d) & {"preset", "file"}) != 1:
        raise SpecError(f"{where}: {item!r}; expected exactly one of preset: NAME or file: PATH")
    try:
        if "preset" in d:
            from accelmap.arch.presets import preset

            arch = preset(schema.name(d, "preset", where, default=schema.REQUIRED))
        else:
            from accelmap.arch.io import load_arch

            arch = load_arch(base / schema.name(d, "file", where, default=schema.REQUIRED))
    except SpecError:
        raise
    except LookupError as exc:
        raise SpecError(f"{where}: {exc}") from exc
    if "name" in d:
        arch = dataclasses.replace(arch, name=schema.name(d, "name", where, default=schema.REQUIRED))
    if "variants" in d:
        return arch_variants(arch, d["variants"], where=f"{where}.variants")
    return [arch]


def arch_variants(arch: Arch, variants: Any, *, where: str = "variants") -> list[Arch]:
    """The cross product of PE array shapes and buffer sizes applied to ``arch``.

    Parameters
    ----------
    variants
        ``{pe_array: [{fanout_x, fanout_y, level?}, ...], buffers: [{level, capacity_words:
        [...]}, ...]}``; both keys optional. ``pe_array`` entries default to the level with
        the largest fanout (the PE array). Each variant is named
        ``base[pe=16x16,GLB=131072w]``.
    """
    v = schema.check_keys(variants, ("pe_array", "buffers"), where, "variants")
    axes: list[list[tuple[str, Callable[[Arch], Arch]]]] = []
    if "pe_array" in v:
        default_level = max(range(arch.n_levels), key=lambda i: (arch.levels[i].fanout, i))
        opts = []
        for j, pe in enumerate(schema.nonempty_list(v, "pe_array", where, "PE array shapes")):
            w = f"{where}.pe_array[{j}]"
            pe = schema.check_keys(pe, ("fanout_x", "fanout_y", "level"), w, "a PE array shape",
                                   required=("fanout_x", "fanout_y"))
            li = arch.level_index(schema.name(pe, "level", w, default=schema.REQUIRED)) if "level" in pe \
                else default_level
            fx = schema.integer(pe, "fanout_x", w, default=schema.REQUIRED)
            fy = schema.integer(pe, "fanout_y", w, default=schema.REQUIRED)
            label = f"pe={fx}x{fy}" if li == default_level else f"{arch.levels[li].name}.pe={fx}x{fy}"
            opts.append((label,
                         _level_setter(li, fanout_x=fx, fanout_y=fy)))
        axes.append(opts)
    for j, buf in enumerate(schema.nonempty_list(v, "buffers", where, "buffer sizes") if "buffers" in v else []):
        w = f"{where}.buffers[{j}]"
        buf = schema.check_keys(buf, ("level", "capacity_words"), w, "a buffer size list",
                                required=("level", "capacity_words"))
        li = arch.level_index(schema.name(buf, "level", w, default=schema.REQUIRED))
        opts = []
        for cap in schema.int_list(buf, "capacity_words", w, "capacities in words"):
            opts.append((f"{arch.levels[li].name}={cap}w", _level_setter(li, capacity_words=cap)))
        axes.append(opts)
    if not axes:
        raise SpecError(f"{where}: no pe_array or buffers given; drop `variants` or give at least one")
    out = []
    for combo in itertools.product(*axes):
        a = arch
        for _, setter in combo:
            a = setter(a)
        out.append(dataclasses.replace(a, name=f"{arch.name}[{','.join(label for label, _ in combo)}]"))
    return out


def _level_setter(index: int, **changes: Any) -> Callable[[Arch], Arch]:
    def apply(arch: Arch) -> Arch:
        levels = list(arch.levels)
        level: StorageLevel = dataclasses.replace(levels[index], **changes)
        levels[index] = level
        return dataclasses.replace(arch, levels=tuple(levels))

    return apply


# --- running ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSummary:
    """What one run of a sweep did."""

    n_tasks: int  # distinct tasks of the sweep
    n_skipped: int  # already done in the store before this run
    n_run: int  # finished (committed) in this run
    n_ok: int
    n_infeasible: int
    n_failed: int  # status error (retried by the next run)
    n_remaining: int  # not done after this run (failed, interrupted or over max_tasks)
    interrupted: bool
    wall_s: float
    store: str


def run_tasks(
    tasks: Sequence[SearchTask],
    *,
    store: ResultStore,
    backend: Backend | None = None,
    task_fn: Callable[[Any], dict[str, Any]] | None = None,
    max_tasks: int | None = None,
    progress: bool = False,
    on_result: Callable[[SearchTask, Outcome], None] | None = None,
) -> SweepSummary:
    """Run the tasks the store does not hold yet; commit each as it finishes.

    Parameters
    ----------
    tasks
        The tasks (duplicate keys run once).
    store
        Where results go; keys it already holds as done are skipped.
    backend
        Where tasks run (default: `SerialBackend`).
    task_fn
        ``task -> payload`` (default: :func:`run_search_task`). Must be a module-level
        function for Ray to ship it by reference.
    max_tasks
        Run at most this many of the remaining tasks (the rest stay for the next run).
    progress
        Show a tqdm bar counting tasks (on stderr).
    on_result
        Called after each commit with the task and its outcome. A KeyboardInterrupt raised
        here (or by Ctrl-C anywhere in the loop) stops the run cleanly: in-flight tasks are
        cancelled, committed rows stay, and the summary says ``interrupted``.
    """
    t0 = time.perf_counter()
    fn = task_fn or run_search_task
    runner = backend or SerialBackend()
    unique: dict[str, SearchTask] = {}
    for t in tasks:
        unique.setdefault(t.key, t)
    done = store.done_keys(unique)
    todo = [t for k, t in unique.items() if k not in done]
    if max_tasks is not None:
        todo = todo[: max(0, max_tasks)]
    counts = {"ok": 0, "infeasible": 0, "error": 0}
    interrupted = False
    from tqdm.auto import tqdm

    bar = tqdm(total=len(unique), initial=len(done), unit="task", desc="tasks", disable=not progress,
               dynamic_ncols=True)
    results = runner.run(fn, todo)
    try:
        for i, outcome in results:
            task = todo[i]
            store.commit(result_row(task, outcome))
            counts[outcome["status"]] += 1
            bar.update(1)
            if counts["error"] or counts["infeasible"]:
                bar.set_postfix(failed=counts["error"], infeasible=counts["infeasible"], refresh=False)
            if on_result is not None:
                on_result(task, outcome)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        results.close()  # cancels in-flight Ray tasks
        bar.close()
    n_run = sum(counts.values())
    n_done_now = len(store.done_keys(unique))
    return SweepSummary(
        n_tasks=len(unique), n_skipped=len(done), n_run=n_run, n_ok=counts["ok"],
        n_infeasible=counts["infeasible"], n_failed=counts["error"],
        n_remaining=len(unique) - n_done_now, interrupted=interrupted,
        wall_s=time.perf_counter() - t0, store=store.path,
    )


def run_sweep(sweep: Sweep, *, store: ResultStore, **kwargs: Any) -> SweepSummary:
    """Run every task of ``sweep`` not yet done in ``store`` (see :func:`run_tasks`)."""
    return run_tasks(sweep.tasks(), store=store, **kwargs)


def result_row(task: SearchTask, outcome: Outcome) -> dict[str, Any]:
    """The store row of a finished task: its labels, its outcome and its payload columns."""
    row: dict[str, Any] = {
        "task_key": task.key,
        "sweep": task.sweep,
        "network": task.network,
        "layer": task.problem.name,
        "repeat": task.problem.repeat,
        "arch": task.arch.name,
        "model": task.model_label,
        "searcher": task.searcher,
        "seed_index": task.seed_index,
        "seed": int(task.seed),
        "objective": task.objective,
        "budget": task.budget,
        "status": outcome["status"],
        "task_json": task.spec(),
        "error": outcome.get("error"),
        "worker": outcome.get("worker"),
        "started_at": outcome.get("started_at"),
        "finished_at": outcome.get("finished_at"),
        "wall_s": outcome.get("wall_s"),
    }
    extra: dict[str, Any] = {}
    for k, v in (outcome.get("payload") or {}).items():
        if k in _PAYLOAD_COLUMNS:
            row[_PAYLOAD_COLUMNS[k]] = v
        else:
            extra[k] = v
    if extra:
        base = row.get("result_json") or {}
        row["result_json"] = {**base, **extra} if isinstance(base, dict) else {"result": base, **extra}
    return row


# --- the real task ------------------------------------------------------------------------
def run_search_task(task: SearchTask) -> dict[str, Any]:
    """Run one search (``accelmap.search.api.search``) and return its store payload.

    Raises whatever the search raises; `accelmap.parallel.backend.execute` turns that into
    an ``infeasible`` or ``error`` outcome. A search stopped by Ctrl-C raises
    KeyboardInterrupt again, so that the run stops and the task stays undone.
    """
    from accelmap.search.api import search

    result = search(task.problem, task.arch, **search_kwargs(task))
    raise_if_interrupted(result)
    return payload_from_result(result)


def raise_if_interrupted(result: Any) -> None:
    """Re-raise a Ctrl-C that the search caught: a partial search must not count as done."""
    if getattr(result, "stop_reason", None) == "interrupted":
        raise KeyboardInterrupt


def search_kwargs(task: SearchTask) -> dict[str, Any]:
    """Keyword arguments of ``accelmap.search.api.search`` for one task."""
    kwargs: dict[str, Any] = {
        "model": task.model,
        "searcher": task.searcher,
        "objective": task.objective,
        "seed": int(task.seed),
        "time_limit_s": task.time_limit_s,
    }
    if task.model_options:  # built on the worker, from the name and options the task carries
        from accelmap._registry import build_costmodel

        kwargs["model"] = build_costmodel(task.model, task.model_options)
    if task.budget is not None:
        kwargs["budget"] = task.budget
    if task.searcher_options:
        kwargs["searcher_options"] = dict(task.searcher_options)
    if task.constraints is not None:
        kwargs["constraints"] = task.constraints
    if task.allow_padding:
        kwargs["allow_padding"] = True
    if task.early_stop is not None:
        kwargs["early_stop"] = task.early_stop
    return kwargs


def payload_from_result(result: Any) -> dict[str, Any]:
    """Store payload from a ``SearchResult``: best metrics and mapping, and the rest as JSON.

    A search that found no legal mapping is ``infeasible`` (its result, with the histogram
    of why mappings were rejected, is kept in ``result_json``).
    """
    data = result.to_dict()
    best = data.get("best")
    payload: dict[str, Any] = {"n_evaluations": data.get("n_evaluations"), "result": data}
    if not best:
        payload["status"] = "infeasible"
        reasons = data.get("invalid_reasons") or {}
        payload["error"] = (
            f"no legal mapping found in {data.get('n_evaluations', 0):,} evaluations"
            + (f"; rejected: {reasons}" if reasons else "")
        )
        return payload
    payload.update(cycles=best["cycles"], energy_pj=best["energy_pj"], edp=best["edp"],
                   mapping=best["mapping"], metrics=best["metrics"])
    # mapping and metrics have their own columns; keep them once
    data["best"] = {k: v for k, v in best.items() if k not in ("mapping", "metrics")}
    return payload
