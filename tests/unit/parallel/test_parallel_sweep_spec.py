"""Sweep files: strict parsing, expansion to tasks, stable keys, architecture variants."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import yaml

from accelmap.errors import SpecError
from accelmap.parallel.sweep import (
    SearchTask,
    arch_variants,
    canonical,
    load_sweep,
    parse_sweep,
    spawn_seeds,
    task_key,
)
from accelmap.testing.examples import small_arch, small_conv

DOC = {
    "version": 1,
    "name": "demo",
    "workloads": [
        {"network": "resnet50", "layers": ["conv1", "conv3_1"]},
        {"layer": "vgg16/conv4_2"},
    ],
    "architectures": [
        {"preset": "eyeriss-like"},
        {"preset": "eyeriss-like", "name": "eyeriss-big",
         "variants": {"pe_array": [{"fanout_x": 16, "fanout_y": 16}, {"fanout_x": 8, "fanout_y": 8}],
                      "buffers": [{"level": "shared_glb", "capacity_words": [65536, 131072]}]}},
    ],
    "models": ["loopnest"],
    "searchers": ["random", {"name": "genetic", "options": {"population": 16}}],
    "seeds": 2,
    "seed": 7,
    "budget": 1000,
}


def test_parse_and_expand():
    sweep = parse_sweep(DOC)
    assert sweep.name == "demo"
    assert [(n, p.name) for n, p in sweep.workloads] == [
        ("resnet50", "conv1"), ("resnet50", "res3a_branch2b"), (None, "conv4_2")]
    assert len(sweep.archs) == 1 + 4
    assert sweep.archs[1].name == "eyeriss-big[pe=16x16,shared_glb=65536w]"
    assert sweep.archs[1].n_macs == 256 and sweep.archs[4].levels[1].capacity_words == 131072
    assert sweep.seeds == spawn_seeds(7, 2)
    tasks = sweep.tasks()
    assert len(tasks) == sweep.n_tasks == 3 * 5 * 1 * 2 * 2
    assert len({t.key for t in tasks}) == len(tasks)
    genetic = [t for t in tasks if t.searcher == "genetic"]
    assert all(t.searcher_options == {"population": 16} and t.budget == 1000 for t in genetic)
    assert {t.seed_index for t in tasks} == {0, 1}


def test_load_sweep_file_with_relative_paths(tmp_path):
    from accelmap.arch.io import save_arch

    (tmp_path / "archs").mkdir()
    save_arch(small_arch(), tmp_path / "archs" / "small.yaml")
    doc = {"version": 1, "workloads": [{"layer": "resnet50/fc"}],
           "architectures": [{"file": "archs/small.yaml"}], "seeds": [3, 4]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    sweep = load_sweep(path)
    assert sweep.name == "s" and sweep.archs[0].name == "small" and sweep.seeds == (3, 4)
    assert sweep.models == ("loopnest",) and sweep.searchers == (("random", {}),)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"version": 2}, "version = 2; expected 1"),
        ({"bogus": 1}, r"bogus: unknown key; accepted keys: version, name"),
        ({"budgte": 5}, r"budgte: unknown key \(did you mean 'budget'\?\)"),
        ({"architectures": [{"preset": "eyeriss-like", "variants": {"buffers": [{"level": "shared_glb",
          "capacity_words": [16, 0]}]}}]}, r"buffers\[0\]\.capacity_words\[1\] = 0; expected an int >= 1"),
        ({"constraints": ["c.yaml", 3]}, r"constraints\[1\] = 3 \(an int\); expected a constraint file path"),
        ({"workloads": []}, "workloads = \\[\\] \\(a list\\); expected a non-empty list"),
        ({"workloads": [{"network": "resnet5"}]}, "resnet50"),
        ({"workloads": [{"network": "resnet50", "file": "x"}]}, "exactly one of"),
        ({"workloads": [{"network": "resnet50", "layers": ["nope"]}]}, "layer of network"),
        ({"architectures": [{"preset": "eyeris-like"}]}, "eyeriss-like"),
        ({"architectures": [{"preset": "eyeriss-like"}, {"preset": "eyeriss-like"}]}, "more than once"),
        ({"architectures": [{"preset": "eyeriss-like", "variants": {"buffers": [{"level": "GLBX", "capacity_words": [1]}]}}]},
         "unknown level"),
        ({"architectures": [{"preset": "eyeriss-like", "variants": {"pe_array": [{"fanout_x": 0, "fanout_y": 2}]}}]},
         r"fanout_x = 0"),
        ({"models": ["loopnet"]}, "loopnest"),
        ({"searchers": [{"name": "genetc"}]}, "genetic"),
        ({"searchers": [{"name": "genetic", "opts": {}}]}, "unknown key"),
        ({"searchers": [{"name": "genetic", "options": {"populaton": 8}}]}, r"no option\(s\) \['populaton'\]"),
        ({"seeds": 0}, "seeds = 0"),
        ({"seeds": [1, 2]}, "explicit list without `seed`"),
        ({"budget": -5}, "budget = -5"),
        ({"time_limit_s": 0}, "time_limit_s = 0"),
        ({"objective": "speed"}, "objective"),
    ],
)
def test_strict_errors(change, match):
    with pytest.raises(SpecError, match=match):
        parse_sweep({**DOC, **change}, source="s.yaml")


def test_task_key_is_stable_and_sensitive():
    p, a = small_conv(), small_arch()
    t = SearchTask(problem=p, arch=a, searcher="genetic", searcher_options={"b": 1, "a": [1, 2]}, seed=5)
    same = SearchTask(problem=small_conv(), arch=small_arch(), searcher="genetic",
                      searcher_options={"a": [1, 2], "b": 1}, seed=5, seed_index=3, sweep="other")
    assert task_key(t) == task_key(same)  # labels seed_index and sweep are not part of the key
    # a key computed in another process from the pickled task agrees
    assert pickle.loads(pickle.dumps(t)).key == t.key
    for change in ({"seed": 6}, {"model": "systolic"}, {"budget": 10}, {"network": "net"},
                   {"searcher_options": {"b": 2, "a": [1, 2]}}, {"problem": small_conv(k=16)},
                   {"arch": small_arch(glb_words=2048)}, {"objective": "energy"}):
        assert dataclasses.replace(t, **change).key != t.key, change
    assert len(t.key) == 64


def test_canonical_forms():
    c = canonical(small_arch())
    assert c["__type__"] == "Arch" and c["levels"][1]["capacity_words"] == 1024
    assert canonical({"b": np.int64(2), "a": frozenset({"y", "x"})}) == {"a": ["x", "y"], "b": 2}
    with pytest.raises(TypeError):
        canonical(object())


def test_spawn_seeds_prefix_stable():
    assert spawn_seeds(0, 5)[:3] == spawn_seeds(0, 3)
    assert len(set(spawn_seeds(0, 5))) == 5
    assert spawn_seeds(1, 2) != spawn_seeds(0, 2)
    assert all(0 <= s < 2**32 for s in spawn_seeds(123, 4))


def test_arch_variants_cross_product():
    base = small_arch()
    vs = arch_variants(base, {
        "pe_array": [{"fanout_x": 2, "fanout_y": 8}],
        "buffers": [{"level": "GLB", "capacity_words": [512, 2048]}, {"level": "RF", "capacity_words": [16, 32]}],
    })
    assert [v.name for v in vs] == [
        "small[pe=2x8,GLB=512w,RF=16w]", "small[pe=2x8,GLB=512w,RF=32w]",
        "small[pe=2x8,GLB=2048w,RF=16w]", "small[pe=2x8,GLB=2048w,RF=32w]"]
    assert vs[3].levels[1].fanout_x == 2 and vs[3].levels[1].fanout_y == 8
    assert vs[3].levels[2].capacity_words == 32 and base.levels[2].capacity_words == 64
    named = arch_variants(base, {"pe_array": [{"level": "DRAM", "fanout_x": 2, "fanout_y": 1}]})
    assert named[0].name == "small[DRAM.pe=2x1]" and named[0].n_macs == 32
    with pytest.raises(SpecError, match="no pe_array or buffers"):
        arch_variants(base, {})


def test_constraints_padding_early_stop(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(
        {"version": 1, "factors": [{"level": "GLB", "dim": "K", "slot": "temporal", "fixed": 2}]}))
    doc = {"version": 1, "workloads": [{"layer": "resnet50/fc"}], "architectures": [{"file": "a.yaml"}],
           "constraints": "c.yaml", "allow_padding": True, "early_stop": 500, "models": ["systolic"]}
    from accelmap.arch.io import save_arch

    save_arch(small_arch(), tmp_path / "a.yaml")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    sweep = load_sweep(tmp_path / "s.yaml")
    (task,) = sweep.tasks()
    assert task.allow_padding and task.early_stop == 500
    assert type(task.constraints).__name__ == "Constraints"
    # a model that counts exact factorizations only is refused when the sweep loads
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**doc, "models": ["systolic", "loopnest"]}))
    assert {t.model for t in load_sweep(tmp_path / "s.yaml").tasks()} == {"systolic", "loopnest"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**doc, "models": ["loopnest", "aspect"]}))
    with pytest.raises(SpecError, match=r"s\.yaml: allow_padding: imperfect factorization .* aspect model"):
        load_sweep(tmp_path / "s.yaml")
    assert task.spec()["constraints"]["__type__"] == "Constraints"
    plain = dataclasses.replace(task, constraints=None)
    assert plain.key != task.key
    for change, match in (({"constraints": "missing.yaml"}, "does not exist"),
                          ({"allow_padding": "yes"}, "allow_padding"), ({"early_stop": 0}, "early_stop")):
        with pytest.raises(SpecError, match=match):
            parse_sweep({**doc, **change}, source="s.yaml", base_dir=tmp_path)


def test_constraint_keys_survive_moving_the_folder(tmp_path):
    from accelmap.arch.io import save_arch

    keys = []
    for sub in ("a", "b"):
        d = tmp_path / sub
        d.mkdir()
        (d / "c.yaml").write_text(yaml.safe_dump(
            {"version": 1, "factors": [{"level": "GLB", "dim": "K", "slot": "temporal", "fixed": 2}]}))
        save_arch(small_arch(), d / "a.yaml")
        doc = {"version": 1, "workloads": [{"layer": "resnet50/fc"}], "architectures": [{"file": "a.yaml"}],
               "constraints": ["c.yaml"]}
        keys.append(parse_sweep(doc, source="s.yaml", base_dir=d).tasks()[0].key)
    assert keys[0] == keys[1]


def test_models_with_options_become_tasks_of_their_own():
    """A model entry ``{name, options}`` carries the model's constructor options: its tasks
    build that model on the worker, their keys and store labels differ from the same model
    without options, and a task without options keeps the key it had before options existed."""
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.parallel.sweep import result_row, search_kwargs

    doc = {"version": 1, "workloads": [{"layer": "resnet50/conv3_1"}], "architectures": [{"preset": "systolic"}],
           "models": ["systolic", {"name": "systolic", "options": {"dram_window": "exact"}}], "budget": 100}
    sweep = parse_sweep(doc)
    assert sweep.models == ("systolic", "systolic")
    assert sweep.model_options == ({}, {"dram_window": "exact"})
    plain, exact = sweep.tasks()
    assert plain.model_options == {} and exact.model_options == {"dram_window": "exact"}
    assert plain.key != exact.key
    assert exact.model_label == "systolic[dram_window=exact]" and plain.model_label == "systolic"
    assert result_row(exact, {"status": "ok"})["model"] == "systolic[dram_window=exact]"
    built = search_kwargs(exact)["model"]
    assert isinstance(built, SystolicModel) and built.dram_window == "exact"
    assert search_kwargs(plain)["model"] == "systolic"
    # the key of a task without model options is the one computed before they existed
    spec = plain.spec()
    assert "model_options" not in spec
    assert pickle.loads(pickle.dumps(exact)).key == exact.key
    no_opts = parse_sweep({**doc, "models": ["systolic"]})
    assert no_opts.model_options == () and no_opts.tasks()[0].key == plain.key


@pytest.mark.parametrize(("entry", "match"), [
    ({"name": "systolic", "options": {"dram_window": "wrong"}}, r"models\[0\]\.options: the systolic model refuses"),
    ({"name": "loopnest", "options": {"bogus": 1}}, r"models\[0\]\.options: cost model 'loopnest' has no option"),
    ({"name": "loopnest", "options": [1]}, r"models\[0\]\.options = .*expected a mapping"),
    ({"name": "loopnst"}, r"models\[0\]\.name: unknown cost model 'loopnst'"),
    ({"name": "loopnest", "opts": {}}, r"models\[0\]\.opts: unknown key"),
])
def test_bad_model_entries_name_where_and_what(entry, match):
    doc = {"version": 1, "workloads": [{"layer": "resnet50/conv3_1"}], "architectures": [{"preset": "systolic"}],
           "models": [entry]}
    with pytest.raises(SpecError, match=match):
        parse_sweep(doc, source="s.yaml")
