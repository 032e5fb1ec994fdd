"""DRAM reads of the systolic model against an independent replay of SCALE-Sim's demand
stream through its prefetch window, on GEMMs of several shapes, arrays and SRAM sizes.

The replay here is written from SCALE-Sim's description (``systolic_compute_{os,ws,is}.py``
demand matrices: folds column-major, skewed operands read along anti-diagonals, the
pre-filled stationary operand read row by row bottom-up; ``read_buffer_estimate_bw.py``:
a window of ``50 * floor(words / 100)`` distinct words, dropped whole when it fills). For
GEMMs every tile is free of duplicates, where the model claims to be exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelmap.arch.presets import systolic_array
from accelmap.costmodels.systolic import SystolicModel, scalesim_mapping
from accelmap.workloads.builders import matmul


def _skewed(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    i, c = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
    key = np.lexsort((c.ravel(), (i + c).ravel()))
    return i.ravel()[key], c.ravel()[key]


def _bottom_up(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    i, c = np.meshgrid(np.arange(n_rows)[::-1], np.arange(n_cols), indexing="ij")
    return i.ravel(), c.ravel()


def _streams(m: int, n: int, k: int, rows: int, cols: int, df: str) -> tuple[np.ndarray, np.ndarray]:
    ifmap = np.arange(m * k).reshape(m, k)  # M x K
    filt = np.arange(k * n).reshape(k, n)  # K x N
    sr, sc = {"os": (m, n), "ws": (k, n), "is": (k, m)}[df]
    out_i, out_f = [], []
    for fc in range(math.ceil(sc / cols)):
        for fr in range(math.ceil(sr / rows)):
            r0, r1 = fr * rows, min(fr * rows + rows, sr)
            c0, c1 = fc * cols, min(fc * cols + cols, sc)
            if df == "os":
                t, c = _skewed(k, r1 - r0)
                out_i.append(ifmap[r0 + c, t])
                t, c = _skewed(k, c1 - c0)
                out_f.append(filt[t, c0 + c])
            elif df == "ws":
                t, c = _skewed(m, r1 - r0)
                out_i.append(ifmap[t, r0 + c])
                i, c = _bottom_up(r1 - r0, c1 - c0)
                out_f.append(filt[r0 + i, c0 + c])
            else:
                i, c = _bottom_up(r1 - r0, c1 - c0)
                out_i.append(ifmap[c0 + c, r0 + i])
                t, c = _skewed(n, r1 - r0)
                out_f.append(filt[r0 + c, t])
    return np.concatenate(out_i), np.concatenate(out_f)


def _window_fetches(stream: np.ndarray, sram_words: int) -> int:
    window = 50 * (sram_words // 100)
    seen: set[int] = set()
    fetched = 0
    for a in stream.tolist():
        if a in seen:
            continue
        seen.add(a)
        fetched += 1
        if len(seen) == window:
            seen = set()
    return fetched


CASES = [
    # m, n, k, rows, cols, sram kB
    (40, 24, 16, 8, 8, 1),
    (64, 64, 64, 16, 16, 1),
    (100, 30, 50, 8, 4, 1),
    (33, 70, 20, 4, 16, 2),
    (128, 96, 80, 32, 32, 4),
    (50, 50, 50, 8, 8, 64),
]


@pytest.mark.parametrize("df", ["os", "ws", "is"])
@pytest.mark.parametrize(("m", "n", "k", "rows", "cols", "kb"), CASES)
def test_dram_reads_equal_the_replayed_window(m, n, k, rows, cols, kb, df):
    prob = matmul("g", m=m, n=n, k=k, word_bits=8)
    arch = systolic_array(rows, cols, kb, kb, kb, dram_bandwidth_words_per_cycle=None)
    s = SystolicModel().stats(prob, arch, scalesim_mapping(prob, arch, df))
    si, sf = _streams(m, n, k, rows, cols, df)
    words = kb * 1024
    assert int(s.sram_reads[0, 0]) == si.size
    assert int(s.sram_reads[0, 1]) == sf.size
    assert int(s.dram_reads[0, 0]) == _window_fetches(si, words)
    assert int(s.dram_reads[0, 1]) == _window_fetches(sf, words)
