"""ROOT files, read with uproot."""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError, MissingFileError, MissingTreeError

if TYPE_CHECKING:
    from .._runtime import BatchData

from ._common import (
    PathLike,
    Setting,
    Source,
    _check_max_events,
    _check_step_size,
    _files,
    _missing,
    unreadable,
)
from ._readahead import ReadBalancer, _ReadAhead


def _cluster_steps(boundaries: Sequence[int], step: int, start: int, stop: int) -> list[tuple[int, int]]:
    """Groups whole clusters ``[b_i, b_i+1)`` into steps of about ``step``
    entries (inside ``[start, stop)``): a step ends at the cluster boundary
    nearest to ``step`` entries from its start, so no cluster's baskets are
    read by two steps. A cluster of 1.5 steps or more is a step of its own,
    split into equal parts of about ``step``."""
    cuts = sorted({b for b in boundaries if start < b < stop} | {start, stop})
    out: list[tuple[int, int]] = []

    lo = cuts[0]
    for prev, hi in itertools.pairwise(cuts):
        parts = round((hi - prev) / step)
        if parts >= 2:
            if prev > lo:
                out.append((lo, prev))
            edges = [prev + (hi - prev) * i // parts for i in range(parts + 1)]
            out.extend(itertools.pairwise(edges))
            lo = hi
            continue
        if prev > lo and (hi - lo) - step > step - (prev - lo):
            # Ending before this cluster is nearer the step than after it.
            out.append((lo, prev))
            lo = prev
        if hi - lo >= step:
            out.append((lo, hi))
            lo = hi
    if lo < stop:
        out.append((lo, stop))
    return out


#: Recently opened TTrees, by (file, tree): (mtime and size when opened, tree).
_TREES: OrderedDict[tuple[str, str], tuple[tuple[int, int], Any]] = OrderedDict()
_TREES_KEPT = 8
_TREES_LOCK = threading.Lock()


class RootSource(Source):
    """Batches of a TTree in one or more ROOT files, read with uproot.

    Steps follow the tree's clusters (the entry ranges whose baskets all
    branches share), so each basket is decompressed once. Steps are read
    ahead of the engine on worker threads (``read_workers``, at most
    ``prefetch`` steps ahead), which :attr:`balancer` (a
    :class:`ReadBalancer`) adapts at run time unless both are fixed.
    """

    #: set by a ``skip_bad_files`` run on its copy: the reader leaves out a
    #: file whose data cannot be read and goes on (``evflow._file_gate``)
    bad_watch: Any = None

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        tree: str = "Events",
        step_size: int = 100_000,
        max_events: int | None = None,
        *,
        read_workers: Setting = "auto",
        prefetch: Setting = "auto",
        read_memory: int | str = "512MB",
    ) -> None:
        step_size = _check_step_size(step_size)
        _check_max_events(max_events)
        self.files = _files(files)
        self.tree = tree
        self.step_size = int(step_size)
        self.max_events = max_events
        self.read_workers = read_workers
        self.prefetch = prefetch
        self.read_memory = read_memory
        self.balancer = ReadBalancer(read_workers, prefetch, memory=read_memory)

    def _open(self, path: str) -> Any:
        """The TTree of ``path`` (opened once while the file is unchanged:
        reading the metadata of a tree with many branches takes a while)."""
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        cache_key = (os.path.abspath(path), self.tree)
        with _TREES_LOCK:
            cached = _TREES.get(cache_key)
            if cached is not None and cached[0] == key:
                _TREES.move_to_end(cache_key)
                return cached[1]
        tree = self._open_tree(path)
        if key is not None:
            with _TREES_LOCK:
                _TREES[cache_key] = (key, tree)
                while len(_TREES) > _TREES_KEPT:
                    _TREES.popitem(last=False)
        return tree

    def _open_tree(self, path: str) -> Any:
        import uproot

        if not os.path.exists(path):
            file, _, tree = path.rpartition(":")
            if file and tree and os.path.exists(file):  # uproot's "file.root:tree"
                raise MissingFileError(
                    f"ROOT file '{path}' does not exist; name the tree apart: "
                    f"ef.source.root({file!r}, tree={tree!r})"
                )
            if any(c in path for c in "*?["):
                raise MissingFileError(
                    f"ROOT file '{path}' does not exist: a pattern is not expanded; list the files, "
                    f"e.g. ef.source.root(sorted(glob.glob({path!r})))"
                )
            raise MissingFileError(f"ROOT file '{path}' does not exist")
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            # uproot's own error ("expected Chunk of length 403, received 0
            # bytes from FSSpecSource") does not say the file is empty.
            raise InputError(f"ROOT file '{path}' is empty (0 bytes): an interrupted copy or write?")
        try:
            f = uproot.open(path)
        except Exception as e:
            raise InputError(f"cannot open ROOT file '{path}': {type(e).__name__}: {e}") from e
        # A file cut short (an interrupted copy) opens, and fails only when a
        # basket past its end is read: its header says where it should end.
        end = getattr(getattr(f, "file", None), "fEND", None)
        size = os.path.getsize(path)
        if isinstance(end, int) and size < end:
            raise InputError(
                f"ROOT file '{path}' is incomplete: {size} bytes of the {end} its header announces "
                "(an interrupted copy or write?)"
            )
        try:
            t = f[self.tree]
        except Exception:
            trees = sorted({k.split(";")[0] for k, v in f.classnames().items() if v.startswith("TTree")})
            raise MissingTreeError(
                f"file '{path}' has no tree '{self.tree}' (trees: {', '.join(trees) or 'none'})"
            ) from None
        if not hasattr(t, "num_entries") or not hasattr(t, "keys"):
            raise MissingTreeError(f"'{self.tree}' in file '{path}' is a {type(t).__name__}, not a TTree")
        return t

    def check(self, columns: Sequence[str]) -> None:
        """Fails before the job on a file or branch that is not there: the
        first file here, every other when the batches are planned
        (:meth:`_steps` opens each file the job reads once anyway; a pass
        of its own opened every file once more, about 0.45 s per NanoAOD
        file, twice with more files than the trees kept open)."""
        self._checked = list(columns)
        for i, path in enumerate(self.files):
            if not os.path.exists(path) and "://" not in path:
                # The first bad file in the listed order is named, as a
                # distributed run names it: the files before it are opened
                # (the job opens them anyway) before the missing one.
                for earlier in self.files[:i]:
                    self._check_branches(earlier, self._open(earlier))
                self._open(path)  # the missing file's own message
        if self.files:
            self._check_branches(self.files[0], self._open(self.files[0]))

    def _check_branches(self, path: str, t: Any) -> None:
        keys = set(t.keys(recursive=True))
        for c in getattr(self, "_checked", ()):
            if c not in keys:
                raise _missing(c, keys, f"tree '{self.tree}' of file '{path}'")

    def total_events(self) -> int | None:
        total = 0
        for path in self.files:
            total += self._open(path).num_entries
        return total if self.max_events is None else min(total, self.max_events)

    def _steps(self) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        left = self.max_events
        for path in self.files:
            if left is not None and left <= 0:
                break
            t = self._open(path)
            if hasattr(t, "keys"):  # not the distributed planner's metadata
                self._check_branches(path, t)
            n = t.num_entries
            stop = n if left is None else min(n, left)
            try:
                bounds = list(t.common_entry_offsets())
            except Exception:
                bounds = [0, n]
            out.extend((path, a, b) for a, b in _cluster_steps(bounds, self.step_size, 0, stop))
            if left is not None:
                left -= stop
        return out

    def _read_step(self, columns: Sequence[str], weight: str | None, step: tuple[str, int, int]) -> BatchData:
        from .._runtime import BatchData

        path, a, b = step
        where = f"file '{path}', tree '{self.tree}', entries {a}-{b - 1}"
        try:
            t = self._open(path)
            cols = t.arrays(
                list(columns), entry_start=a, entry_stop=b, library="ak", how=dict, array_cache=None
            )
        except Exception as e:
            raise unreadable(f"reading {where}: {type(e).__name__}: {e}", path, a, b) from e
        # uproot stops at the tree's end: a file replaced or cut since the
        # job was planned gives fewer entries than planned.
        short = next((len(v) for v in cols.values() if len(v) != b - a), None)
        if short is not None:
            raise unreadable(
                f"reading {where}: {short} entries read, {b - a} planned (was the file replaced or "
                "cut during the job?)",
                path,
                a,
                b,
            )
        return BatchData(cols, b - a, file=path, entry_start=a, entry_stop=b, where=where, weight=weight)

    def empty_batch(self, columns: Sequence[str], weight: str | None) -> BatchData | None:
        from .._runtime import BatchData

        path = self.files[0]
        where = f"file '{path}', tree '{self.tree}', no entry (the columns' types)"
        try:
            cols = self._open(path).arrays(list(columns), entry_start=0, entry_stop=0, library="ak", how=dict)
        except Exception as e:
            raise InputError(f"reading {where}: {type(e).__name__}: {e}") from e
        return BatchData(cols, 0, file=path, entry_start=0, entry_stop=0, where=where, weight=weight)

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        """Reads steps ahead on worker threads, balanced by :attr:`balancer`."""
        cols = list(columns)
        if self.bad_watch is not None:
            return self.bad_watch.reader(
                self._steps(), lambda step: self._read_step(cols, weight, step), self.balancer
            )
        return _ReadAhead(self._steps(), lambda step: self._read_step(cols, weight, step), self.balancer)

    def describe(self) -> str:
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"ROOT {files} (tree '{self.tree}')"


def root(
    files: PathLike | Iterable[PathLike],
    tree: str = "Events",
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
    read_workers: Setting = "auto",
    prefetch: Setting = "auto",
    read_memory: int | str = "512MB",
) -> RootSource:
    """ROOT files read with uproot: ``files`` (one path or a list), the TTree
    name, events per batch, and an optional limit on the total events.

    Steps are read ahead on ``read_workers`` threads, at most ``prefetch``
    batches ahead of the engine and within ``read_memory``; ``"auto"`` lets a
    :class:`ReadBalancer` choose both at run time."""
    return RootSource(
        files,
        tree,
        step_size,
        max_events,
        read_workers=read_workers,
        prefetch=prefetch,
        read_memory=read_memory,
    )
