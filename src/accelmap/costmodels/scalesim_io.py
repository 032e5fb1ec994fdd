"""Read SCALE-Sim's inputs: a config ``.cfg`` and a topology CSV (convolution or GEMM).

So that SCALE-Sim users can bring their files: :func:`read_config` gives the array, SRAM
sizes, DRAM bandwidth and dataflow; :func:`config_arch` turns them into an accelmap `Arch`
in the systolic layout; :func:`read_topology` turns each CSV row into a `Problem`.

SCALE-Sim's conventions, kept on purpose so that counts compare one to one:

* convolutions have no padding and round the output size *up*:
  ``ofmap = ceil((ifmap - filter) / stride) + 1`` (its ``topology_utils``); the extra
  windows of a strided layer run past the ifmap edge (SCALE-Sim skips those addresses), so
  the problem's Inputs tensor carries the ifmap's extent (``input_hw``) and only the words
  that exist are fetched from DRAM;
* a GEMM row ``M, N, K`` is ``ifmap M x K``, ``filter K x N``, ``ofmap M x N``;
* words are 1 byte unless the config says otherwise; sizes are kB of 1024 bytes;
* ``InterfaceBandwidth: CALC`` sizes the DRAM bandwidth for stall-free operation
  (unlimited here); ``USER`` uses ``Bandwidth`` words per cycle.
"""

from __future__ import annotations

import configparser
import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelmap._files import read_text
from accelmap.arch.spec import Arch
from accelmap.costmodels.systolic import Dataflow
from accelmap.errors import SpecError
from accelmap.workloads.problem import Problem

__all__ = ["ScaleSimConfig", "ScaleSimLayer", "read_config", "config_arch", "read_topology", "replay_dram_reads"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleSimConfig:
    """The parts of a SCALE-Sim config the systolic model uses."""

    run_name: str
    rows: int
    cols: int
    ifmap_sram_kb: int
    filter_sram_kb: int
    ofmap_sram_kb: int
    dataflow: Dataflow
    bandwidth_words_per_cycle: float | None  # None = CALC (stall-free)
    word_bytes: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleSimLayer:
    """One topology row: its name, the problem, and SCALE-Sim's own view of it."""

    name: str
    problem: Problem
    kind: str  # "conv" or "gemm"
    fields: tuple[tuple[str, int], ...]  # the row's numbers, in SCALE-Sim's naming




def read_config(path: str | Path) -> ScaleSimConfig:
    """Parse a SCALE-Sim ``.cfg`` file.

    Raises
    ------
    SpecError
        A required key is missing or malformed; the message names the file, section and key.
    FileNotFoundError
        ``path`` does not exist.
    """
    path = Path(path)
    text = read_text(path)
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise SpecError(f"{path}: not a SCALE-Sim config ({exc.__class__.__name__}: {exc})") from exc
    sec = "architecture_presets"
    if not parser.has_section(sec):
        raise SpecError(f"{path}: no [{sec}] section; expected SCALE-Sim's config layout (see its configs/scale.cfg)")

    def get(section: str, key: str) -> str:
        if not parser.has_option(section, key):
            raise SpecError(f"{path}: [{section}] {key} is missing; expected it as in SCALE-Sim's configs/scale.cfg")
        return parser.get(section, key).strip()

    def get_int(key: str) -> int:
        raw = get(sec, key)
        try:
            value = int(raw)
        except ValueError:
            raise SpecError(f"{path}: [{sec}] {key} = {raw!r}; expected an int >= 1") from None
        if value < 1:
            raise SpecError(f"{path}: [{sec}] {key} = {value}; expected an int >= 1")
        return value

    rows, cols = get_int("ArrayHeight"), get_int("ArrayWidth")
    kb = (get_int("IfmapSramSzkB"), get_int("FilterSramSzkB"), get_int("OfmapSramSzkB"))
    raw_df = get(sec, "Dataflow")
    try:
        df = Dataflow.parse(raw_df)
    except SpecError:
        raise SpecError(f"{path}: [{sec}] Dataflow = {raw_df!r}; expected os, ws or is") from None
    mode = "CALC"
    if parser.has_option("run_presets", "InterfaceBandwidth"):
        mode = parser.get("run_presets", "InterfaceBandwidth").strip().upper()
    if mode not in ("CALC", "USER"):
        raise SpecError(f"{path}: [run_presets] InterfaceBandwidth = {mode!r}; expected CALC or USER")
    bandwidth: float | None = None
    if mode == "USER":
        raw_bw = get(sec, "Bandwidth")
        try:
            bandwidth = float(raw_bw)
        except ValueError:
            raise SpecError(f"{path}: [{sec}] Bandwidth = {raw_bw!r}; expected a number > 0") from None
        if not bandwidth > 0:
            raise SpecError(f"{path}: [{sec}] Bandwidth = {raw_bw!r}; expected a number > 0")
    word_bytes = 1
    if parser.has_option(sec, "WordSize"):
        word_bytes = get_int("WordSize")
    run_name = parser.get("general", "run_name", fallback=path.stem).strip() or path.stem
    return ScaleSimConfig(
        run_name=run_name, rows=rows, cols=cols, ifmap_sram_kb=kb[0], filter_sram_kb=kb[1],
        ofmap_sram_kb=kb[2], dataflow=df, bandwidth_words_per_cycle=bandwidth, word_bytes=word_bytes,
    )


def config_arch(config: ScaleSimConfig) -> Arch:
    """The accelmap arch (systolic layout) of a SCALE-Sim config."""
    from accelmap.arch.presets import systolic_array

    return systolic_array(
        rows=config.rows,
        cols=config.cols,
        ifmap_sram_kb=config.ifmap_sram_kb,
        filter_sram_kb=config.filter_sram_kb,
        ofmap_sram_kb=config.ofmap_sram_kb,
        dram_bandwidth_words_per_cycle=config.bandwidth_words_per_cycle,
        word_bits=8 * config.word_bytes,
        name=config.run_name,
    )


_CONV_HEAD = ("layer name", "ifmap height", "ifmap width", "filter height", "filter width",
              "channels", "num filter", "strides")
_GEMM_HEAD = ("layer name", "m", "n", "k")


def read_topology(path: str | Path, *, word_bits: int = 8) -> list[ScaleSimLayer]:
    """Parse a SCALE-Sim topology CSV, convolution or GEMM format (told apart by the header).

    Convolution rows: ``name, ifmap H, ifmap W, filter H, filter W, channels, filters,
    stride``; GEMM rows: ``name, M, N, K``. Trailing empty cells (SCALE-Sim writes a comma
    at the end of each row) and blank lines are ignored.

    Raises
    ------
    SpecError
        An unknown header or a malformed row; the message names the file and line.
    """
    from accelmap.workloads.builders import conv2d, matmul

    path = Path(path)
    with path.open(newline="") as fh:
        rows = [(i + 1, [c.strip() for c in row]) for i, row in enumerate(csv.reader(fh))]
    rows = [(ln, [c for c in r if c != ""]) for ln, r in rows]
    rows = [(ln, r) for ln, r in rows if r]
    if not rows:
        raise SpecError(f"{path}: empty topology; expected a header and one row per layer")
    head_ln, head = rows[0]
    head_l = tuple(h.lower() for h in head)
    if head_l[:4] == _GEMM_HEAD and len(head_l) == 4:
        kind, n_fields = "gemm", 3
    elif head_l[:8] == _CONV_HEAD:
        kind, n_fields = "conv", 7
    else:
        raise SpecError(
            f"{path}:{head_ln}: header {', '.join(head)!r}; expected SCALE-Sim's convolution header "
            f"({', '.join(h.title() for h in _CONV_HEAD)}) or GEMM header (Layer Name, M, N, K)"
        )
    layers: list[ScaleSimLayer] = []
    names: set[str] = set()
    for ln, row in rows[1:]:
        name = row[0]
        if len(row) < 1 + n_fields:
            raise SpecError(f"{path}:{ln}: layer {name!r} has {len(row) - 1} numbers; expected {n_fields}")
        nums: list[int] = []
        for col, cell in zip(head[1:1 + n_fields], row[1:1 + n_fields], strict=True):
            try:
                v = int(cell)
            except ValueError:
                raise SpecError(f"{path}:{ln}: layer {name!r}: {col} = {cell!r}; expected an int >= 1") from None
            if v < 1:
                raise SpecError(f"{path}:{ln}: layer {name!r}: {col} = {v}; expected an int >= 1")
            nums.append(v)
        if name in names:
            raise SpecError(f"{path}:{ln}: duplicate layer name {name!r}")
        names.add(name)
        fields: tuple[tuple[str, int], ...]
        if kind == "gemm":
            m, n, k = nums
            prob = matmul(name, m=m, n=n, k=k, word_bits=word_bits)
            fields = (("M", m), ("N", n), ("K", k))
        else:
            h, w, fh_, fw, ch, nf, st = nums
            if fh_ > h or fw > w:
                raise SpecError(
                    f"{path}:{ln}: layer {name!r}: filter {fh_}x{fw} is larger than the ifmap {h}x{w}; "
                    "SCALE-Sim convolutions have no padding"
                )
            # SCALE-Sim rounds the output size up (topology_utils): ceil((H - R) / stride) + 1.
            p = math.ceil((h - fh_) / st) + 1
            q = math.ceil((w - fw) / st) + 1
            prob = conv2d(name, c=ch, k=nf, p=p, q=q, r=fh_, s=fw, stride=st, input_hw=(h, w),
                          word_bits=word_bits)
            fields = (("ifmap_h", h), ("ifmap_w", w), ("filter_h", fh_), ("filter_w", fw),
                      ("channels", ch), ("num_filters", nf), ("stride", st), ("ofmap_h", p), ("ofmap_w", q))
        layers.append(ScaleSimLayer(name=name, problem=prob, kind=kind, fields=fields))
    if not layers:
        raise SpecError(f"{path}: no layers after the header")
    return layers


# --- SCALE-Sim's prefetch window, replayed (exact DRAM reads for comparisons) -----------------


def _operand_addresses(layer: ScaleSimLayer) -> tuple[np.ndarray, np.ndarray]:
    """SCALE-Sim's operand address matrices of a layer: ifmap (pixels x window), filter
    (window x filters). Conv ifmaps are laid out row, column, channel; windows past the
    edge (its rounded-up output size) read address -1. GEMM: ifmap M x K, filter K x N."""
    f = dict(layer.fields)
    if layer.kind == "gemm":
        m, n, k = f["M"], f["N"], f["K"]
        return np.arange(m * k, dtype=np.int64).reshape(m, k), np.arange(k * n, dtype=np.int64).reshape(k, n)
    h, w, fh, fw = f["ifmap_h"], f["ifmap_w"], f["filter_h"], f["filter_w"]
    ch, nf, st, eh, ew = f["channels"], f["num_filters"], f["stride"], f["ofmap_h"], f["ofmap_w"]
    win = fh * fw * ch
    p, j = np.arange(eh * ew, dtype=np.int64), np.arange(win, dtype=np.int64)
    r = (p // ew)[:, None] * st + (j // (fw * ch))[None, :]
    c = (p % ew)[:, None] * st + ((j % (fw * ch)) // ch)[None, :]
    ifmap = np.where((r >= h) | (c >= w), -1, r * w * ch + c * ch + (j % ch)[None, :])
    return ifmap, np.arange(nf, dtype=np.int64)[None, :] * win + j[:, None]


def _skewed(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of a skewed fold read line by line: along anti-diagonals, left to right."""
    i, c = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")
    key = np.lexsort((c.ravel(), (i + c).ravel()))
    return i.ravel()[key], c.ravel()[key]


def _bottom_up(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of a pre-filled stationary fold: bottom row first, left to right."""
    i, c = np.meshgrid(np.arange(n_rows)[::-1], np.arange(n_cols), indexing="ij")
    return i.ravel(), c.ravel()


def _demand_streams(ifmap: np.ndarray, filt: np.ndarray, rows: int, cols: int,
                    dataflow: Dataflow) -> tuple[np.ndarray, np.ndarray]:
    """The ifmap and filter addresses in the order SCALE-Sim's array demands them (column
    folds outer, row folds inner; ``systolic_compute_{os,ws,is}.py``)."""
    px, win = ifmap.shape
    nf = filt.shape[1]
    sr, sc = {Dataflow.OS: (px, nf), Dataflow.WS: (win, nf), Dataflow.IS: (win, px)}[dataflow]
    s_i: list[np.ndarray] = []
    s_f: list[np.ndarray] = []
    for fc in range(-(-sc // cols)):
        for fr in range(-(-sr // rows)):
            r0, r1 = fr * rows, min(fr * rows + rows, sr)
            c0, c1 = fc * cols, min(fc * cols + cols, sc)
            if dataflow is Dataflow.OS:
                t, c = _skewed(win, r1 - r0)
                s_i.append(ifmap[r0 + c, t])
                t, c = _skewed(win, c1 - c0)
                s_f.append(filt[t, c0 + c])
            elif dataflow is Dataflow.WS:
                t, c = _skewed(px, r1 - r0)
                s_i.append(ifmap[t, r0 + c])
                i, c = _bottom_up(r1 - r0, c1 - c0)
                s_f.append(filt[r0 + i, c0 + c])
            else:
                i, c = _bottom_up(r1 - r0, c1 - c0)
                s_i.append(ifmap[c0 + c, r0 + i])
                t, c = _skewed(nf, r1 - r0)
                s_f.append(filt[r0 + c, t])
    return np.concatenate(s_i), np.concatenate(s_f)


def _window_fetches(stream: np.ndarray, window: int) -> int:
    """Words fetched by SCALE-Sim's CALC-mode read buffer for a demand stream: the distinct
    addresses since the last reset, the window dropped whole when it holds ``window`` words.
    Vectorized per window: the reset falls at the first use of the window-th new address."""
    s = stream[stream >= 0]
    total, start, n = 0, 0, s.shape[0]
    while start < n:
        span = max(4 * window, 1 << 16)
        while True:
            uniq, first = np.unique(s[start:start + span], return_index=True)
            if uniq.shape[0] >= window:
                first.sort()
                total += window
                start += int(first[window - 1]) + 1
                break
            if start + span >= n:
                total += int(uniq.shape[0])
                start = n
                break
            span *= 2
    return total


def replay_dram_reads(layer: ScaleSimLayer, config: ScaleSimConfig) -> tuple[int, int]:
    """SCALE-Sim's own DRAM reads (ifmap, filter) of one layer, by replaying its demand
    streams through its CALC-mode prefetch window (``read_buffer_estimate_bw.py``: 100 sets
    of ``floor(words / 100)`` words, half active). Exact on the reference runs; tenths of a
    second per layer, so it is a comparison tool (the oracle), not a cost model: the
    systolic model counts the same words with ``dram_window="exact"`` (a compiled walk of
    the same stream, milliseconds per layer) or estimates them in closed form (default)."""
    ifmap, filt = _operand_addresses(layer)
    s_i, s_f = _demand_streams(ifmap, filt, config.rows, config.cols, config.dataflow)
    words = (config.ifmap_sram_kb * 1024 // config.word_bytes, config.filter_sram_kb * 1024 // config.word_bytes)
    return (_window_fetches(s_i, 50 * (words[0] // 100)), _window_fetches(s_f, 50 * (words[1] // 100)))
