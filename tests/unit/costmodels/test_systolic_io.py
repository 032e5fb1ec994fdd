"""SCALE-Sim config and topology reading (accelmap.costmodels.scalesim_io) and the
``evaluate --scalesim-*`` command line."""

from __future__ import annotations

import json

import pytest

from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology
from accelmap.costmodels.systolic import Dataflow, SystolicModel
from accelmap.costmodels.systolic_variants import scalesim_mapping
from accelmap.errors import SpecError

CFG = """[general]
run_name = tiny_{df}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   2
FilterSramSzkB:  4
OfmapSramSzkB:   8
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : {df}
MemoryBanks:   1

[run_presets]
InterfaceBandwidth: {mode}
"""

CONV = """Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,
L1, 9, 9, 3, 3, 4, 8, 1,
L2, 9, 9, 1, 1, 8, 16, 2,
"""

GEMM = """Layer Name, M, N, K,
G1, 20, 13, 30,
"""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_read_config_and_arch(tmp_path):
    p = _write(tmp_path, "a.cfg", CFG.format(df="ws", rows=8, cols=4, mode="USER"))
    cfg = read_config(p)
    assert (cfg.rows, cfg.cols, cfg.dataflow, cfg.bandwidth_words_per_cycle) == (8, 4, Dataflow.WS, 10.0)
    assert cfg.run_name == "tiny_ws"
    arch = config_arch(cfg)
    assert arch.n_macs == 32
    caps = {lv.name: lv.capacity_words for lv in arch.levels}
    assert caps["ifmap_sram"] == 2048 and caps["filter_sram"] == 4096 and caps["ofmap_sram"] == 8192
    assert arch.levels[0].read_bandwidth_words_per_cycle == 10.0


def test_calc_mode_means_unlimited_bandwidth(tmp_path):
    cfg = read_config(_write(tmp_path, "a.cfg", CFG.format(df="os", rows=4, cols=4, mode="CALC")))
    assert cfg.bandwidth_words_per_cycle is None
    assert config_arch(cfg).levels[0].read_bandwidth_words_per_cycle is None


@pytest.mark.parametrize(("text", "match"), [
    (CFG.format(df="xs", rows=4, cols=4, mode="CALC"), "Dataflow = 'xs'"),
    (CFG.format(df="os", rows=0, cols=4, mode="CALC"), "ArrayHeight = 0"),
    (CFG.format(df="os", rows="four", cols=4, mode="CALC"), "ArrayHeight = 'four'"),
    (CFG.format(df="os", rows=4, cols=4, mode="FAST"), "InterfaceBandwidth"),
    (CFG.replace("IfmapSramSzkB:   2\n", "").format(df="os", rows=4, cols=4, mode="CALC"), "IfmapSramSzkB is missing"),
    ("[general]\nrun_name = x\n", r"no \[architecture_presets\]"),
    ("not an ini file", "not a SCALE-Sim config"),
])
def test_bad_configs_say_where(tmp_path, text, match):
    p = _write(tmp_path, "bad.cfg", text)
    with pytest.raises(SpecError, match=match) as info:
        read_config(p)
    assert "bad.cfg" in str(info.value)


def test_conv_topology_uses_scalesim_output_size(tmp_path):
    layers = read_topology(_write(tmp_path, "t.csv", CONV))
    assert [x.kind for x in layers] == ["conv", "conv"]
    l1, l2 = (x.problem for x in layers)
    b1 = dict(zip(l1.dim_names, l1.bounds.tolist(), strict=True))
    assert (b1["P"], b1["Q"], b1["C"], b1["K"], b1["R"]) == (7, 7, 4, 8, 3)
    # 1x1 stride 2 on 9: ceil((9 - 1) / 2) + 1 = 5 (the floor formula gives 5 too); on 10 it differs
    assert dict(zip(l2.dim_names, l2.bounds.tolist(), strict=True))["P"] == 5
    assert dict(layers[0].fields)["ofmap_h"] == 7
    assert l1.tensors[0].word_bits == 8


def test_ceil_output_size_on_even_input(tmp_path):
    text = CONV.splitlines()[0] + "\nS2, 56, 56, 1, 1, 4, 4, 2,\n"
    (layer,) = read_topology(_write(tmp_path, "t.csv", text))
    assert dict(layer.fields)["ofmap_h"] == 29  # SCALE-Sim: ceil(55 / 2) + 1


def test_gemm_topology(tmp_path):
    (g,) = read_topology(_write(tmp_path, "g.csv", GEMM))
    assert g.kind == "gemm"
    assert dict(zip(g.problem.dim_names, g.problem.bounds.tolist(), strict=True)) == {"M": 20, "N": 13, "K": 30}


@pytest.mark.parametrize(("text", "match"), [
    ("Name, A, B\nx, 1, 2\n", "header"),
    (GEMM + "G2, 4, 5,\n", "has 2 numbers; expected 3"),
    (GEMM + "G2, 4, five, 6,\n", "N = 'five'"),
    (GEMM + "G1, 4, 5, 6,\n", "duplicate layer name"),
    (CONV.splitlines()[0] + "\nB, 3, 3, 5, 5, 1, 1, 1,\n", "larger than the ifmap"),
    ("", "empty topology"),
    ("Layer Name, M, N, K,\n", "no layers"),
])
def test_bad_topologies_say_where(tmp_path, text, match):
    with pytest.raises(SpecError, match=match):
        read_topology(_write(tmp_path, "bad.csv", text))


def test_scalesim_files_evaluate_end_to_end(tmp_path):
    cfg = read_config(_write(tmp_path, "a.cfg", CFG.format(df="is", rows=8, cols=8, mode="CALC")))
    arch = config_arch(cfg)
    (g,) = read_topology(_write(tmp_path, "g.csv", GEMM))
    r = SystolicModel().stats(g.problem, arch, scalesim_mapping(g.problem, arch, cfg.dataflow)).report(0)
    assert r["total_cycles"] == 419  # 12 folds x (2*8 + 8 + 13 - 2) - 1
    assert r["dataflow"] == "is"


def test_cli_table_and_json(tmp_path, capsys):
    from accelmap.cli import main

    cfg = _write(tmp_path, "a.cfg", CFG.format(df="os", rows=8, cols=8, mode="CALC"))
    topo = _write(tmp_path, "g.csv", GEMM)
    assert main(["evaluate", "--scalesim-config", str(cfg), "--scalesim-topology", str(topo)]) == 0
    out = capsys.readouterr().out
    assert "total_cycles" in out and "dram_writes_ofmap" in out and "G1" in out
    assert main(["evaluate", "--scalesim-config", str(cfg), "--scalesim-topology", str(topo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layers"][0]["total_cycles"] == 263
    assert data["layers"][0]["sram_writes"] == {"ofmap": 356}


def test_cli_needs_both_files(tmp_path, capsys):
    from accelmap.cli import main

    cfg = _write(tmp_path, "a.cfg", CFG.format(df="os", rows=8, cols=8, mode="CALC"))
    assert main(["evaluate", "--scalesim-config", str(cfg)]) == 2
    assert "--scalesim-topology is missing" in capsys.readouterr().err


def test_cli_replays_scalesim_dram_reads(tmp_path, capsys):
    from accelmap.cli import main

    cfg = _write(tmp_path, "a.cfg", CFG.format(df="ws", rows=4, cols=4, mode="CALC"))
    topo = _write(tmp_path, "t.csv", CONV)
    assert main(["evaluate", "--scalesim-config", str(cfg), "--scalesim-topology", str(topo),
                 "--scalesim-replay-dram", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dram_reads_source"] == "replayed SCALE-Sim prefetch window"
    row = data["layers"][0]
    assert set(row["dram_reads"]) == {"ifmap", "filter"} and "dram_reads_model" in row
    # filters have no im2col duplicates: model and replay agree
    assert row["dram_reads"]["filter"] == row["dram_reads_model"]["filter"]


def test_replay_matches_the_model_on_a_gemm(tmp_path):
    from accelmap.costmodels.scalesim_io import replay_dram_reads

    text = CFG.format(df="os", rows=8, cols=8, mode="CALC").replace("IfmapSramSzkB:   2", "IfmapSramSzkB:   1")
    cfg = read_config(_write(tmp_path, "a.cfg", text))
    arch = config_arch(cfg)
    (g,) = read_topology(_write(tmp_path, "g.csv", GEMM))
    s = SystolicModel().stats(g.problem, arch, scalesim_mapping(g.problem, arch, cfg.dataflow))
    assert replay_dram_reads(g, cfg) == (int(s.dram_reads[0, 0]), int(s.dram_reads[0, 1]))
