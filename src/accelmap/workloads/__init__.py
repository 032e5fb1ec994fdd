"""Workloads: the `Problem` spec, layer builders, a model zoo, and readers/writers.

* :mod:`~accelmap.workloads.problem`: ``Problem``, ``Dim``, ``Tensor``, ``Term``, ``TensorRole``.
* :mod:`~accelmap.workloads.builders`: ``conv2d``, ``conv2d_from_input``, ``pointwise``,
  ``matmul``, ``batched_matmul``, ``fully_connected``.
* :mod:`~accelmap.workloads.zoo`: ``networks()``, ``network(name)``, ``layer("net/layer")``.
* :mod:`~accelmap.workloads.io`: strict accelmap problem YAML/JSON, and ``load_problem``
  (zoo name, accelmap file or Timeloop problem file).
* :mod:`~accelmap.workloads.onnx_import`: ``problems_from_onnx`` (needs ``accelmap[onnx]``).
"""

from __future__ import annotations

from accelmap.workloads.builders import (
    batched_matmul,
    conv2d,
    conv2d_from_input,
    conv_output_size,
    fully_connected,
    matmul,
    pointwise,
)
from accelmap.workloads.io import (
    load_problem,
    load_problem_file,
    problem_from_dict,
    problem_to_dict,
    save_problem,
)
from accelmap.workloads.onnx_import import problems_from_onnx
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term
from accelmap.workloads.zoo import Network, layer, network, networks

__all__ = [
    "Problem",
    "Dim",
    "Tensor",
    "TensorRole",
    "Term",
    "conv2d",
    "conv2d_from_input",
    "conv_output_size",
    "pointwise",
    "matmul",
    "batched_matmul",
    "fully_connected",
    "Network",
    "networks",
    "network",
    "layer",
    "load_problem",
    "load_problem_file",
    "save_problem",
    "problem_to_dict",
    "problem_from_dict",
    "problems_from_onnx",
]
