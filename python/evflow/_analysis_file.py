"""Loading an analysis file, always from its current contents.

A Dask worker process outlives a run: it keeps the analysis it built (by a
token of the shipped payload) and every module the analysis file imported
in ``sys.modules``. :class:`AnalysisFile` pickles with a fingerprint of the
file and of the local modules it imported (their contents), so an edited
file or helper module is a new payload, hence a new token; and
:func:`load_analysis` drops the local modules an earlier load imported when
one of their files changed, so they are imported again instead of reused.
"Local" modules are those outside the Python installation (the analysis's
own helpers), plain ``.py`` files only: a compiled extension cannot be
imported twice in a process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import runpy
import sys
import sysconfig
import threading
from functools import lru_cache
from typing import Any

__all__ = ["AnalysisFile", "load_analysis"]

#: Local modules imported by a load in this process: name -> (file, digest
#: of the file when it was imported).
_TRACKED: dict[str, tuple[str, str | None]] = {}
#: Loads change sys.path and sys.modules: one at a time per process.
_LOCK = threading.RLock()


def _digest(path: str) -> str | None:
    """The SHA-1 of the file's contents (``None``: unreadable)."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _installed() -> tuple[str, ...]:
    """Folders of the Python installation: modules there never change
    during a session (and third-party packages must not be re-imported)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # evflow itself
    return tuple(os.path.realpath(r) + os.sep for r in roots)


def _local_file(module: Any) -> str | None:
    """The ``.py`` file of a local module (``None``: none, or installed)."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    real = os.path.realpath(path)
    return None if real.startswith(_installed()) else real


def drop_stale() -> list[str]:
    """Removes from ``sys.modules`` every local module an earlier load
    imported when any of their files changed (all of them: an unchanged
    module may hold names of a changed one); returns their names."""
    with _LOCK:
        changed = any(_digest(path) != digest for path, digest in _TRACKED.values())
        if not changed:
            return []
        names = sorted(_TRACKED)
        for name in names:
            module = sys.modules.pop(name, None)
            cached = getattr(module, "__cached__", None)
            if isinstance(cached, str):
                # A file edited within the second it was compiled, at the same
                # size, would pass the bytecode cache's check: recompile.
                with contextlib.suppress(OSError):
                    os.remove(cached)
        _TRACKED.clear()
        return names


def load_analysis(path: str, name: str | None = None) -> Any:
    """The Process that the analysis file ``path`` defines (a module-level
    ``proc``, the only Process, or the one named ``name``), from the file's
    current contents and those of the local modules it imports."""
    from ._process import Process
    from .errors import ConfigurationError, EvflowError

    if not os.path.exists(path):
        raise ConfigurationError(f"analysis file '{path}' does not exist")
    key = os.path.abspath(path)
    with _LOCK:
        drop_stale()
        before = set(sys.modules)
        sys.path.insert(0, os.path.dirname(key))
        try:
            env = runpy.run_path(path, run_name="__evflow__")
        except SyntaxError as e:
            raise ConfigurationError(
                f"analysis file '{path}', line {e.lineno}: {type(e).__name__}: {e.msg}"
            ) from None
        except EvflowError:
            raise
        except Exception as e:
            # The file's own code failed at import (not a run): name the
            # file; the traceback is the cause.
            raise ConfigurationError(
                f"analysis file '{path}' failed while loading: {type(e).__name__}: {e}"
            ) from e
        finally:
            sys.path.pop(0)
            _track(set(sys.modules) - before)
    found = {k: v for k, v in env.items() if isinstance(v, Process)}
    if name is not None:
        by_name = {k: v for k, v in found.items() if k == name or v.name == name}
        if len(by_name) != 1:
            raise ConfigurationError(
                f"'{path}' defines no single Process named '{name}' (found: {sorted(found)})"
            )
        return next(iter(by_name.values()))
    if "proc" in found:
        return found["proc"]
    if len(found) == 1:
        return next(iter(found.values()))
    if not found:
        raise ConfigurationError(
            f"'{path}' defines no evflow Process at module level (write e.g. proc = ef.Process(...))"
        )
    raise ConfigurationError(
        f"'{path}' defines several Processes ({sorted(found)}): choose one with --process"
    )


def _track(new: set[str]) -> None:
    """Remembers the local modules a load imported, with their contents."""
    for mod_name in new:
        module = sys.modules.get(mod_name)
        local = _local_file(module) if module is not None else None
        if local is not None:
            _TRACKED[mod_name] = (local, _digest(local))


def fingerprint(path: str) -> str:
    """The contents of the analysis file and of the local modules loads in
    this process imported, as one digest. Every such module counts (a second
    analysis file may use a helper the first one imported: the import is
    not seen again): an unrelated edit only rebuilds the analysis once."""
    h = hashlib.sha1(str(_digest(os.path.abspath(path))).encode())
    with _LOCK:
        files = sorted((n, file) for n, (file, _d) in _TRACKED.items())
    for mod_name, file in files:
        h.update(f"\0{mod_name}\0{_digest(file)}".encode())
    return h.hexdigest()


class AnalysisFile:
    """A callable that loads the Process of an analysis file: what a
    distributed run ships to its workers instead of the pickled analysis
    (which then need not be picklable). It pickles with the fingerprint of
    the file's current contents and its local modules': the workers'
    cache of built analyses is keyed by the pickled bytes, so an edited
    file is built anew.

    Example::

        >>> import evflow as ef
        >>> target = ef.distributed.analysis_file("analysis.py")  # doctest: +SKIP
        >>> ef.distributed.run(target, client="tcp://host:8786")  # doctest: +SKIP
    """

    def __init__(self, path: str, name: str | None = None, fingerprint: str = "") -> None:
        self.path = os.path.abspath(path)
        self.name = name
        #: the contents it was pickled with (informative: the load reads the file)
        self.fingerprint = fingerprint

    def __call__(self) -> Any:
        return load_analysis(self.path, self.name)

    def __reduce__(self) -> tuple[Any, tuple[str, str | None, str]]:
        return (AnalysisFile, (self.path, self.name, fingerprint(self.path)))

    def __repr__(self) -> str:
        return f"AnalysisFile({self.path!r}, name={self.name!r})"
