"""Timeloop formats used with loopnest: problem, arch (+ERT) and mapping readers/writer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelmap.arch.timeloop import arch_from_timeloop, ert_energies
from accelmap.errors import SpecError
from accelmap.mapper.timeloop import mapping_from_timeloop, mapping_to_timeloop
from accelmap.workloads.problem import TensorRole
from accelmap.workloads.timeloop import problem_from_timeloop, problem_to_timeloop

DATA = Path(__file__).resolve().parents[2] / "golden" / "data" / "timeloop"

CONV = yaml.safe_load("""
problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
    coefficients:
    - {name: Wstride, default: 1}
    - {name: Hstride, default: 1}
    - {name: Wdilation, default: 1}
    - {name: Hdilation, default: 1}
    data-spaces:
    - {name: Weights, projection: [[[C]], [[M]], [[R]], [[S]]]}
    - name: Inputs
      projection: [[[N]], [[C]], [[R, Wdilation], [P, Wstride]], [[S, Hdilation], [Q, Hstride]]]
    - {name: Outputs, projection: [[[N]], [[M]], [[Q]], [[P]]], read-write: true}
  instance: {C: 64, M: 128, R: 3, S: 3, N: 1, P: 28, Q: 28, Wstride: 2, Hstride: 2}
""")


def test_problem_roles_bounds_and_strides() -> None:
    p = problem_from_timeloop(CONV, "conv.yaml")
    assert p.dim_names == ("C", "M", "R", "S", "N", "P", "Q")
    assert p.bounds.tolist() == [64, 128, 3, 3, 1, 28, 28]
    roles = {t.name: t.role for t in p.tensors}
    assert roles == {"Weights": TensorRole.WEIGHT, "Inputs": TensorRole.INPUT, "Outputs": TensorRole.OUTPUT}
    # input width = 2*(P-1) + (R-1) + 1 = 57 with stride 2
    assert p.tensor_sizes()[p.tensor_index("Inputs")] == 64 * 57 * 57


def test_problem_unnamed_operands_first_is_input() -> None:
    data = yaml.safe_load("""
problem:
  shape:
    dimensions: [M, N, K]
    data-spaces:
    - {name: A, projection: [[[M]], [[K]]]}
    - {name: B, projection: [[[K]], [[N]]]}
    - {name: Z, projection: [[[M]], [[N]]], read-write: true}
  instance: {M: 4, N: 5, K: 6}
""")
    p = problem_from_timeloop(data, "gemm.yaml")
    assert [t.role for t in p.tensors] == [TensorRole.INPUT, TensorRole.WEIGHT, TensorRole.OUTPUT]
    back = problem_from_timeloop(problem_to_timeloop(p), "again")
    assert back.bounds.tolist() == p.bounds.tolist() and back.tensors == p.tensors


def test_problem_errors_name_the_key_path() -> None:
    bad = yaml.safe_load(yaml.safe_dump(CONV))
    bad["problem"]["shape"]["data-spaces"][0]["projection"][0] = [["X"]]
    with pytest.raises(SpecError, match=r"data-spaces\[0\]\.projection\[0\].*unknown dimension 'X'"):
        problem_from_timeloop(bad, "conv.yaml")
    bad = yaml.safe_load(yaml.safe_dump(CONV))
    bad["problem"]["instance"]["Zstride"] = 2
    with pytest.raises(SpecError, match=r"problem.instance.Zstride"):
        problem_from_timeloop(bad, "conv.yaml")


def _load(name: str):
    arch = yaml.safe_load((DATA / name / "arch.yaml").read_text())
    ert_path = DATA / name / "ERT.yaml"
    ert = yaml.safe_load(ert_path.read_text()) if ert_path.exists() else None
    return arch_from_timeloop(arch, str(DATA / name / "arch.yaml"), ert)


def test_eyeriss_like_arch_levels_mesh_and_energies() -> None:
    a = _load("eyeriss_like")
    assert a.name == "eyeriss_like"
    assert a.level_names == ("DRAM", "shared_glb", "DummyBuffer", "ifmap_spad", "weights_spad", "psum_spad")
    assert a.instances.tolist() == [1, 1, 14, 168, 168, 168]
    assert a.fanouts.tolist() == [[1, 1], [14, 1], [1, 12], [1, 1], [1, 1], [1, 1]]
    glb = a.levels[1]
    assert (glb.capacity_words, glb.block_words, glb.read_energy_pj, glb.write_energy_pj) == (65536, 4, 74.144, 75.215)
    assert glb.read_bandwidth_words_per_cycle == 16
    assert a.levels[0].capacity_words is None and a.levels[0].read_energy_pj == 512
    assert a.compute.energy_per_mac_pj == 2.2


def test_simple3_arch_without_ert() -> None:
    a = _load("simple3")
    assert a.fanouts.tolist() == [[1, 1], [16, 16], [1, 1]]
    assert [lv.read_energy_pj for lv in a.levels] == [200, 6, 1]
    assert a.n_macs == 256


def test_arch_missing_energy_says_how_to_fix() -> None:
    arch = yaml.safe_load((DATA / "eyeriss_like" / "arch.yaml").read_text())
    with pytest.raises(SpecError, match="no access energy.*ERT"):
        arch_from_timeloop(arch, "arch.yaml", None)


def test_ert_takes_largest_argument_variant() -> None:
    ert = {"ERT": {"tables": [{"name": "sys.PE[0..3].buf", "actions": [
        {"name": "read", "arguments": [{"energy": 1.0}, {"energy": 3.0}]}, {"name": "write", "energy": 2.0}]}]}}
    assert ert_energies(ert) == {"buf": {"read": 3.0, "write": 2.0}}


MAP = yaml.safe_load("""
mapping:
- {target: DRAM, type: temporal, factors: C=1 M=4 R=1 S=1 N=1 P=1 Q=4, permutation: QMCRSNP}
- {target: GLB, type: temporal, factors: C4 M1 R1 S1 N1 P1 Q1, permutation: RSCMNPQ}
- {target: GLB, type: spatial, factors: C=16 M=16, permutation: CMRSNPQ, split: 1}
- {target: RF, type: temporal, factors: P=56 Q=14, permutation: PQNCMRS}
- {target: RF, type: bypass, keep: [Weights], bypass: [Inputs, Outputs]}
""")


def test_mapping_reader_and_writer_round_trip() -> None:
    a = _load("simple3")
    conv = yaml.safe_load(yaml.safe_dump(CONV))
    conv["problem"]["instance"].update({"C": 64, "M": 64, "R": 1, "S": 1, "P": 56, "Q": 56, "Wstride": 1, "Hstride": 1})
    p = problem_from_timeloop(conv, "p")
    m = mapping_from_timeloop(MAP, p, a, "map.yaml")
    d = p.dim_index
    # permutation is innermost first: QMCRSNP -> M outside Q at DRAM
    dram_order = m.order[0].tolist()
    assert dram_order.index(d("M")) < dram_order.index(d("Q"))
    assert m.temporal[0, d("M")] == 4 and m.temporal[1, d("C")] == 4
    assert m.spatial[1, d("C")].tolist() == [16, 1] and m.spatial[1, d("M")].tolist() == [1, 16]
    assert m.keep[2].tolist() == [True, False, False]
    again = mapping_from_timeloop(mapping_to_timeloop(m, p, a), p, a, "written")
    assert again == m


def test_mapping_reader_rejects_unknown_target() -> None:
    a = _load("simple3")
    p = problem_from_timeloop(CONV, "p")
    with pytest.raises(SpecError, match=r"mapping\[0\]\.target = 'L2'"):
        mapping_from_timeloop({"mapping": [{"target": "L2", "type": "temporal"}]}, p, a, "map.yaml")


def test_arch_v04_nodes_form_matches_tree_form() -> None:
    nodes = yaml.safe_load("""
architecture:
  version: 0.4
  nodes:
  - {name: system}
  - {name: DRAM, class: DRAM, attributes: {word_bits: 16, block_size: 4, vector-access-energy: 512}}
  - {name: eyeriss}
  - {name: shared_glb, class: SRAM, attributes: {depth: 16384, block_size: 4, vector-access-energy: 75}}
  - {name: DummyBuffer, class: regfile, spatial: {meshX: 14}, attributes: {depth: 16, vector-access-energy: 0.2}}
  - {name: PE, spatial: {meshY: 12}}
  - {name: ifmap_spad, class: regfile, attributes: {depth: 12, vector-access-energy: 0.24}}
  - {name: mac, class: intmac, attributes: {energy: 2.2}}
""")
    a = arch_from_timeloop(nodes, "nodes.yaml")
    assert a.level_names == ("DRAM", "shared_glb", "DummyBuffer", "ifmap_spad")
    assert a.instances.tolist() == [1, 1, 14, 168]
    assert a.fanouts.tolist() == [[1, 1], [14, 1], [1, 12], [1, 1]]
    assert a.levels[1].capacity_words == 65536


def test_problem_dense_densities_accepted_sparse_rejected() -> None:
    dense = yaml.safe_load(yaml.safe_dump(CONV))
    dense["problem"]["instance"]["densities"] = {"Weights": 1.0, "Inputs": {"distribution": "fixed", "density": 1}}
    assert problem_from_timeloop(dense, "p").macs == problem_from_timeloop(CONV, "p").macs
    sparse = yaml.safe_load(yaml.safe_dump(CONV))
    sparse["problem"]["instance"]["densities"] = {"Weights": 0.5}
    with pytest.raises(SpecError, match="sparse tensors are not modelled"):
        problem_from_timeloop(sparse, "p")
