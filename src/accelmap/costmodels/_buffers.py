"""Output arrays handed out again across calls of a compiled engine (`OutputBuffers`).

A compiled engine's call of 100,000 rows writes tens of MB of fresh outputs; mapping them anew
on every call costs page faults that can take as long as the rows themselves. Both compiled
cost models keep one `OutputBuffers` per model: the systolic model for its `Metrics` fields
(`_systolic_engine`), the loopnest model for the (n, 6, L, T) counts of `evaluate`
(`LoopNestModel`). Nothing here changes a result; it only decides which memory a result is
written into, and (`OutputBuffers.take_marked`) lets a kernel know what an earlier call of its
own left in a set it gets again.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["OutputBuffers"]


class OutputBuffers:
    """The kernel's output arrays of earlier calls, handed out again once nothing refers to
    them any more, and the read-only zeros of `metrics_from`, kept per model (at most
    ``keep`` sets of each).

    Why: a call of 100,000 rows allocates about 60 MB of outputs in a dozen arrays of up to
    12 MB. glibc serves such blocks from its heap once its mmap threshold has grown, and
    gives the heap's top back to the system whenever the free space there exceeds its trim
    threshold; whether that happens between two calls depends on the order and sizes of
    everything freed, so the same call ran either with about 70 page faults or with about
    2,000 (every page of the outputs touched anew), `evaluate` 1.4-1.5x the time, and a
    change elsewhere in the allocations (one array fewer) could flip it. Handing the same
    arrays out again takes the allocator out of the row loop's way.

    A set is handed out again only when no reference to any of its arrays is left but the
    set's own (``sys.getrefcount`` at most what it was when the set was made, measured by
    the same expression): a `Metrics` (or any view of one of its arrays: a view refers to its
    base) that its caller keeps is never overwritten; the caller then gets a new set. A
    pickled model carries no buffers.

    A set may carry a mark (`take_marked`, `mark`): what its writer says the arrays hold
    besides the outputs asked for, e.g. the loopnest counts' entries that are zero in every
    row of a structure. A set is unmarked whenever it is handed out, and marked again only by
    its writer (`mark`), after the writer has filled it, so a call that failed half way leaves
    no mark; a writer that marks a set hands its callers read-only views of it only (a caller
    that wrote into the set could make the mark untrue)."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        # [key, arrays, references when made, mark (None: nothing known)]
        self._sets: list[list] = []
        self._zeros: list[np.ndarray] = []

    def __reduce__(self) -> tuple:
        return (OutputBuffers, (self.keep,))

    def take(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], tag: Any = None) -> dict[str, np.ndarray]:
        """Arrays (uninitialised) of the given names, shapes and dtypes: a set that nothing
        refers to any more if one matches, else new arrays. ``tag`` (hashable; None: the
        plain sets above): a set of this tag is made of zeros and handed out only again
        under the same tag, for writers that leave some elements as they found them (the
        systolic driver's cells that hold 0.0 in every row: `_systolic_cpu.cell_tag`)."""
        # (the names, shapes and dtypes as given: one C-level tuple, no dtype objects made; a
        # call site that names one dtype two ways only misses a reuse. Every object touched
        # here is cold after a large call's rows, so each costs several times its warm time.)
        return self.take_marked(shapes, None, tag)[0]

    def take_marked(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]],
                    mark: object, tag: Any = None) -> tuple[dict[str, np.ndarray], bool]:
        """`take`, and whether the set handed out carried ``mark`` (set by `mark` after an
        earlier call filled it; a new set carries none). The set is unmarked now."""
        key = (tuple(shapes.items()), tag)
        with _BUFFERS_LOCK:
            for j, entry in enumerate(self._sets):
                if entry[0] == key and _refs(entry[1]) <= entry[2]:
                    self._sets.append(self._sets.pop(j))  # (most recently used last)
                    had = mark is not None and entry[3] == mark
                    entry[3] = None
                    return dict(zip(shapes, entry[1], strict=True)), had
            make = np.empty if tag is None else np.zeros
            arrays = tuple(make(s, dtype=t) for s, t in shapes.values())
            self._sets.append([key, arrays, _refs(arrays), None])
            del self._sets[:-self.keep]
            return dict(zip(shapes, arrays, strict=True)), False

    def mark(self, arrays: Mapping[str, np.ndarray], mark: object) -> None:
        """Mark the set of ``arrays`` (as `take` or `take_marked` handed it out) with ``mark``
        (hashable; compared with ``==``): its writer has filled it, and the next
        `take_marked` of it with an equal mark is told so. No effect on a set no longer kept."""
        first = next(iter(arrays.values()), None)
        with _BUFFERS_LOCK:
            for entry in self._sets:
                if entry[1] and entry[1][0] is first:
                    entry[3] = mark
                    return

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        """A read-only float64 array of zeros of this shape (the same one for every call)."""
        with _BUFFERS_LOCK:
            for z in self._zeros:
                if z.shape == shape:
                    return z
            z = np.zeros(shape)
            z.flags.writeable = False
            self._zeros = [*self._zeros, z][-self.keep:]
            return z


_BUFFERS_LOCK = threading.Lock()


def _refs(arrays: tuple[np.ndarray, ...]) -> int:
    """The most references to one of ``arrays`` (`OutputBuffers`: compared only with its own
    value when the set was made, so the references this expression holds cancel out)."""
    return max(map(sys.getrefcount, arrays), default=0)
