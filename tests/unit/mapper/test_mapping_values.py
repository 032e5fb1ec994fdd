"""`Mapping` / `MappingBatch` built through the Python API: every value the int64 / bool
conversion would change is refused with the field and index named, and a dim's factors that
multiply past 2^62 (where the cost models' int64 product could wrap around) are refused; the
damaged mappings the legality check reports (zero, negative or wrong factors) stay buildable."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap import Mapping, MappingBatch, SpecError
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.check import Reason
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping, wrapping_factor_pair


def _fields():
    p, a = small_conv(), small_arch()
    m = trivial_mapping(p, a)
    return p, a, {"temporal": m.temporal.copy(), "spatial": m.spatial.copy(), "order": m.order.copy(),
                  "keep": m.keep.copy()}


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("temporal", 2.7, "2.7"),
    ("temporal", np.nan, "nan"),
    ("temporal", np.inf, "inf"),
    ("temporal", 2.0**63, r"9.223372036854776e\+18"),
    ("spatial", 1.5, "1.5"),
    ("order", 0.5, "0.5"),
    ("keep", 2, "2"),
    ("keep", 0.5, "0.5"),
])
def test_values_the_conversion_would_change_are_refused(field, value, shown):
    _, _, f = _fields()
    arr = f[field].astype(np.float64 if isinstance(value, float) else np.int64)
    arr.reshape(-1)[3] = value
    idx = list(map(int, np.unravel_index(3, arr.shape)))
    with pytest.raises(SpecError, match=rf"mapping {field}\[{', '.join(map(str, idx))}\]: {shown} is not"):
        Mapping(**{**f, field: arr})
    with pytest.raises(SpecError, match=rf"mapping {field}\[0, {', '.join(map(str, idx))}\]: {shown} is not"):
        MappingBatch(**{k: np.stack([v, v]) for k, v in {**f, field: arr}.items()})


def test_unsigned_and_python_integers_past_int64_are_refused():
    _, _, f = _fields()
    big = f["temporal"].astype(np.uint64)
    big[1, 0] = 2**64 - 1  # would wrap to -1
    with pytest.raises(SpecError, match=r"mapping temporal\[1, 0\]: 18446744073709551615 is not a whole number"):
        Mapping(**{**f, "temporal": big})
    rows = f["temporal"].tolist()
    rows[2][1] = 2**70
    with pytest.raises(SpecError, match=r"mapping temporal\[2, 1\]: 1180591620717411303424 is not"):
        Mapping(**{**f, "temporal": rows})
    with pytest.raises(SpecError, match=r"mapping order\[0, 0\]: 'a' is not"):
        Mapping(**{**f, "order": np.full(f["order"].shape, "a")})


def test_whole_floats_and_zero_one_keep_flags_are_accepted():
    _, _, f = _fields()
    m = Mapping(temporal=f["temporal"].astype(np.float64), spatial=f["spatial"].astype(np.float32),
                order=f["order"].astype(np.int16), keep=f["keep"].astype(np.int8))
    assert m == Mapping(**f)
    assert m.temporal.dtype == np.int64 and m.keep.dtype == np.bool_


def test_a_wrapping_factor_product_is_refused_and_damaged_mappings_are_not():
    p, a, f = _fields()
    f1, f2 = wrapping_factor_pair()
    t = f["temporal"].copy()
    n = p.dim_names.index("N")  # its bound is 1: f1 * f2 wraps to exactly the bound in int64
    assert int(np.prod(np.array([f1, f2], dtype=np.int64))) == 1
    t[0, n], t[2, n] = f1, f2
    with pytest.raises(SpecError, match=rf"^mapping: the factors of dim {n} multiply to {f1 * f2} \(level 0: {f1}, level 2: {f2}\), more than 2\^62"):
        Mapping(**{**f, "temporal": t})
    t_neg = t.copy()
    t_neg[0, n] = -f1  # a product past -2^62 wraps as well
    with pytest.raises(SpecError, match=rf"the factors of dim {n} multiply to {-f1 * f2} "):
        Mapping(**{**f, "temporal": t_neg})
    batch = {k: np.stack([v, v, v]) for k, v in f.items()}
    batch["temporal"][2] = t
    with pytest.raises(SpecError, match=rf"^mapping: row 2: the factors of dim {n} multiply to {f1 * f2} \(level 0: {f1}, level 2: {f2}\)"):
        MappingBatch(**batch)
    # Spatial factors count too: the product is over temporal x spatial X x spatial Y.
    s = f["spatial"].copy()
    s[0, n, 0], s[1, n, 1] = f1, f2
    with pytest.raises(SpecError, match=rf"^mapping: the factors of dim {n} multiply to {f1 * f2} \(level 0 spatial_x: {f1}, level 1 spatial_y: {f2}\)"):
        Mapping(**{**f, "spatial": s})
    # Zero, negative and wrong factors stay buildable: the legality check reports them.
    damaged = f["temporal"].copy()
    damaged[0, 0], damaged[1, 1], damaged[0, n] = 0, -3, 5
    m = Mapping(**{**f, "temporal": damaged})
    metrics = LoopNestModel().evaluate(p, a, m.as_batch())
    assert not metrics.valid[0] and metrics.reason[0] == Reason.FACTORS


def test_samplers_batches_and_row_selections_keep_their_values():
    p, a = small_conv(), small_arch()
    batch = MapSpace(p, a).sample(64, np.random.default_rng(0))
    again = MappingBatch(temporal=batch.temporal, spatial=batch.spatial, order=batch.order, keep=batch.keep)
    assert again == batch
    assert batch.take(np.arange(0, 64, 3)) == MappingBatch.from_mappings([batch[i] for i in range(0, 64, 3)])
    assert MappingBatch.concat([batch.take(slice(0, 10)), batch.take(slice(10, 64))]) == batch
