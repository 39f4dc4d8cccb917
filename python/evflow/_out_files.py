"""The files and directories a command-line run writes (``--report``,
``--trace``, ``--save``, ``--plot``): checked before the job starts, so that
a long job does not end without them, and written whole at its end.

As the core ``evflow`` command does: a regular file is written beside
itself and renamed over (a failed write leaves no truncated file that looks
complete); what is not a regular file is never replaced: a symbolic link is
followed (its target is written), a device or a pipe (``/dev/stdout``, a
FIFO) is written into directly.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence

from .errors import ConfigurationError

__all__ = ["check_directories", "check_files", "destination", "make_directory", "write_text"]


def destination(path: str) -> tuple[str, bool]:
    """Where writing ``path`` goes, its symbolic links followed (also a
    link to a file not written yet), and whether that is a stream (a
    device, a pipe or a socket: written into, never replaced)."""
    try:
        st = os.stat(path)  # follows the links, also /proc's magic ones (/dev/stdout)
    except OSError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ConfigurationError(f"{path}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            return path, True
    return os.path.realpath(path), False


def _probe(directory: str) -> None:
    """Creates and removes a file in ``directory``: permissions alone do not
    tell whether it takes files (``/proc``, a read-only file system)."""
    fd, name = tempfile.mkstemp(prefix=".evflow-probe-", dir=directory)
    os.close(fd)
    os.remove(name)


def check_files(
    options: Sequence[tuple[str, str | None]],
    inputs: Sequence[tuple[str, str]] = (),
    written: Sequence[tuple[str, str]] = (),
) -> None:
    """Checks, before the job, that each ``(option, path)`` can be written:
    not a directory, its directory exists and takes a new file, no two
    options name the same file, and none names one of ``inputs``
    (``(what, path)``: the analysis file, an input file) or of the files
    other options write (``written``: ``(option, path)``, e.g. ``--save``'s)."""
    seen: dict[str, str] = {os.path.realpath(p): option for option, p in written}
    for option, path in options:
        if not path:
            continue
        try:
            target, stream = destination(path)
        except ConfigurationError as e:
            raise ConfigurationError(f"{option} {e}") from None
        if stream:
            continue  # a device or a pipe: opening a pipe here would wait for its reader
        for what, given in inputs:
            if os.path.exists(given) and os.path.realpath(given) == target:
                raise ConfigurationError(f"{option} {path} is the {what}: it would be overwritten")
        d = os.path.dirname(target) or "."
        if not os.path.isdir(d):
            raise ConfigurationError(f"{option} {path}: no directory '{os.path.dirname(path) or d}'")
        try:
            _probe(d)
        except OSError as e:
            raise ConfigurationError(f"{option} {path}: cannot write in '{d}' ({e.strerror or e})") from None
        if target in seen:
            raise ConfigurationError(f"{seen[target]} and {option} name the same file, {path}")
        seen[target] = option


def check_directories(options: Sequence[tuple[str, str | None]]) -> None:
    """Checks, before the job, that each ``(option, directory)`` is a
    directory that takes files, or can be made (its nearest existing parent
    is a directory that takes files)."""
    for option, path in options:
        if not path:
            continue
        there = os.path.abspath(path)
        while not os.path.exists(there):
            there = os.path.dirname(there)
        if not os.path.isdir(there):
            what = "is a file" if there == os.path.abspath(path) else f"'{there}' is a file"
            raise ConfigurationError(f"{option} {path}: not a directory ({what})")
        try:
            _probe(there)
        except OSError as e:
            raise ConfigurationError(
                f"{option} {path}: cannot write in '{there}' ({e.strerror or e})"
            ) from None


def make_directory(path: str, what: str) -> str:
    """Makes the directory ``path`` (and its parents); a clear error, naming
    ``what`` wrote there, when a file is in the way."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise ConfigurationError(f"{what}: '{path}' is a file, not a directory") from None
    except NotADirectoryError:
        raise ConfigurationError(
            f"{what}: cannot make the directory '{path}': a part of it is a file"
        ) from None
    except OSError as e:
        raise ConfigurationError(f"{what}: cannot make the directory '{path}' ({e.strerror or e})") from None
    return path


def write_text(path: str, text: str) -> None:
    """Writes ``text`` whole at ``path``: a regular file atomically, through
    a symbolic link to its target, into a device or a pipe directly."""
    target, stream = destination(path)
    if stream:
        with open(target, "w") as f:
            f.write(text)
        return
    tmp = f"{target}.partial-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
