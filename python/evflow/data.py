"""Dataset tool: build large, realistic inputs from small real files.

::

    python -m evflow.data resample INPUT.root --tree Events --events N --out OUT.parquet [--seed S]
    python -m evflow.data resample INPUT.root --tree events --events N --out OUT.root

``resample`` draws ``N`` events uniformly with replacement from the input
tree (a seeded generator: the same arguments give the same file) and writes
them in chunks (Parquet row groups / ROOT clusters of ``--chunk`` events).
Every output event is a real event of the input, with every branch (or the
``--branches`` chosen, shell-style patterns allowed) intact, so jet
multiplicities, correlations and pass rates are those of the real data.
The output is written to a temporary name and renamed when complete.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "resample"]


def _select(keys: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    if not patterns:
        return list(keys)
    out = []
    for k in keys:
        if any(fnmatch.fnmatchcase(k, p) for p in patterns):
            out.append(k)
    missing = [p for p in patterns if not any(fnmatch.fnmatchcase(k, p) for k in keys)]
    if missing:
        from .errors import MissingBranchError

        raise MissingBranchError(f"no branch matches {missing}")
    return out


def _read(path: str, tree: str, patterns: Sequence[str] | None) -> dict[str, Any]:
    from .source import RootSource

    if path.endswith((".parquet", ".pq")):
        from .errors import ConfigurationError

        raise ConfigurationError(f"resample reads ROOT files; '{path}' is a Parquet file")
    src = RootSource(path, tree)
    t = src._open(path)
    names = _select([k for k in t.keys() if not t[k].keys()], patterns)  # noqa: SIM118 (a TTree iterates branches)
    return t.arrays(names, library="ak", how=dict)


def _root_groups(arrays: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Arranges branches for uproot's TTree writer, keeping every name:
    jagged branches ``P_x`` with equal counts become a record ``P`` (uproot
    writes ``nP``, ``P_x``, ...; an input ``nP`` of those counts is that
    counter); other jagged branches (``LHEPdfWeight``, or ``P_y`` of other
    counts) are written alone, with their own counter ``n{name}``. Returns
    the dict to write and the branches that cannot be written to ROOT
    (lists of strings, missing values, unions, deeper nesting; a counter
    name taken by another branch): :func:`resample` refuses those."""
    import awkward as ak
    import numpy as np

    flat: dict[str, Any] = {}
    jagged: dict[str, dict[str, Any]] = {}
    alone: dict[str, Any] = {}
    skipped: list[str] = []
    for name, a in arrays.items():
        t = str(ak.type(a).content)
        if "?" in t or "union" in t or ("string" in t and t != "string"):
            skipped.append(name)  # a flat string branch is written; lists of strings are not
        elif a.ndim == 1 or (a.ndim == 2 and a.layout.purelist_isregular):
            flat[name] = a  # a fixed-size array (float[3]) is written as one
        elif a.ndim == 2 and "_" in name:
            prefix, field = name.split("_", 1)
            jagged.setdefault(prefix, {})[field] = a
        elif a.ndim == 2:
            alone[name] = a
        else:
            skipped.append(name)

    def counts_of(a: Any) -> Any:
        return ak.to_numpy(ak.num(a))

    def is_counter(counter: str, counts: Any) -> bool:
        """Whether ``counter`` may be written as the counter of ``counts``:
        no branch has that name, or it is a flat integer branch of those values."""
        if counter in jagged or counter in alone or counter in out:
            return False
        if counter not in flat:
            return True
        c = flat[counter]
        return (
            c.ndim == 1
            and str(ak.type(c).content).startswith(("int", "uint"))
            and np.array_equal(ak.to_numpy(c), counts)
        )

    out: dict[str, Any] = {}
    for prefix, fields in jagged.items():
        groups: list[tuple[Any, dict[str, Any]]] = []
        for field, a in fields.items():
            counts = counts_of(a)
            for g_counts, g_fields in groups:
                if np.array_equal(g_counts, counts):
                    g_fields[field] = a
                    break
            else:
                groups.append((counts, {field: a}))
        # The record takes the group its counter nP counts (NanoAOD's
        # convention), the first when there is no nP; the others go alone.
        record = next((i for i, (c, _) in enumerate(groups) if is_counter(f"n{prefix}", c)), None)
        if prefix in flat or prefix in alone:
            record = None
        for i, (_, g_fields) in enumerate(groups):
            if i == record:
                out[prefix] = ak.zip(g_fields)
                flat.pop(f"n{prefix}", None)
            else:
                alone.update({f"{prefix}_{field}": a for field, a in g_fields.items()})
    for name, a in alone.items():
        counter = f"n{name}"
        if not is_counter(counter, counts_of(a)):
            skipped.append(name)
            continue
        out[name] = a
        flat.pop(counter, None)
    out.update(flat)
    return out, skipped


def resample(
    input: str,
    out: str,
    *,
    tree: str = "Events",
    events: int,
    seed: int = 1,
    chunk: int = 100_000,
    branches: Sequence[str] | None = None,
    compression: str = "zstd",
    verbose: bool = False,
) -> str:
    """Writes ``events`` events drawn (with replacement, seeded) from
    ``input``'s tree to ``out`` (``.parquet`` or ``.root``)."""
    import awkward as ak
    import numpy as np

    from .errors import ConfigurationError

    kind = os.path.splitext(out)[1].lower()
    if kind not in (".parquet", ".root"):
        raise ConfigurationError(f"output '{out}' must end in .parquet or .root")
    if events <= 0 or chunk <= 0:
        raise ConfigurationError(
            f"resample: events (--events) and chunk (--chunk) must be positive, not {events} and {chunk}"
        )
    _check_out(input, out)
    arrays = _read(input, tree, branches)
    n_in = len(next(iter(arrays.values()))) if arrays else 0
    if n_in == 0:
        from .errors import InputError

        what = "has no entry" if arrays else "has no branch to copy"
        raise InputError(
            f"cannot resample file '{input}': its tree '{tree}' {what}, nothing to draw events from"
        )
    rng = np.random.default_rng(seed)
    d, name = os.path.split(os.path.abspath(out))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{name}.evflow-partial-{os.getpid()}")
    t0 = time.perf_counter()
    try:
        if kind == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            names = list(arrays)
            writer = None
            try:
                for start in range(0, events, chunk):
                    idx = rng.integers(0, n_in, min(chunk, events - start))
                    cols = [ak.to_arrow(arrays[c][idx], extensionarray=False) for c in names]
                    table = pa.Table.from_arrays(cols, names=names)
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema, compression=compression)
                    writer.write_table(table, row_group_size=chunk)
                    if verbose:
                        _progress(start + len(idx), events)
            finally:
                if writer is not None:
                    writer.close()
        else:
            import uproot

            grouped, skipped = _root_groups(arrays)
            if skipped:
                raise ConfigurationError(
                    f"cannot resample '{input}' to ROOT: branches {skipped} have a type a ROOT TTree "
                    "cannot take here (lists of strings, missing values, unions, deeper nesting, or a "
                    "counter name another branch has); leave them out (--branches) or write Parquet"
                )
            # uproot writes each jagged branch's counter (`nJet`) as int32 (NanoAOD's
            # are uint32): the values are the same.
            with uproot.recreate(tmp, compression=uproot.ZLIB(1)) as f:
                for start in range(0, events, chunk):
                    idx = rng.integers(0, n_in, min(chunk, events - start))
                    part = {k: v[idx] for k, v in grouped.items()}
                    if start == 0:
                        # mktree: a TTree (assignment would make an RNTuple)
                        out_tree = f.mktree(tree, part)
                    else:
                        out_tree.extend(part)
                    if verbose:
                        _progress(start + len(idx), events)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if verbose:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(f"wrote {events} events to {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def _check_out(input: str, out: str) -> None:
    """Refuses an output that is the input (also through a link or another
    path) or a directory, before anything is read."""
    from .errors import ConfigurationError

    if os.path.isdir(out):
        raise ConfigurationError(f"resample: the output '{out}' is a directory; give a file name")
    same = os.path.abspath(out) == os.path.abspath(input)
    if not same and os.path.exists(out) and os.path.exists(input):
        same = os.path.samefile(out, input)
    if same:
        raise ConfigurationError(
            f"resample: the output '{out}' is the input file '{input}'; writing it would replace the events "
            "it draws from: give another --out"
        )


def _progress(done: int, events: int) -> None:
    """One line rewritten in place on a terminal, a line per chunk in a log."""
    if sys.stderr.isatty():
        print(f"\r{done}/{events} events", end="", file=sys.stderr, flush=True)
    else:
        print(f"{done}/{events} events", file=sys.stderr)


def main(argv: Sequence[str] | None = None, prog: str = "python -m evflow.data") -> int:
    from .errors import EvflowError

    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("resample", help="draw N events (with replacement) from a small ROOT file")
    r.add_argument("input", help="input ROOT file")
    r.add_argument("--tree", default="Events", help="tree name (default: Events)")
    r.add_argument("--events", "-n", type=int, required=True, help="number of events to write")
    r.add_argument("--out", "-o", required=True, help="output file: .parquet or .root")
    r.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    r.add_argument(
        "--chunk", type=int, default=100_000, help="events per row group / cluster (default 100000)"
    )
    r.add_argument("--branches", nargs="+", default=None, help="branches to keep (patterns like 'Jet_*')")
    r.add_argument("--compression", default="zstd", help="Parquet compression (default zstd)")
    r.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    try:
        resample(
            args.input,
            args.out,
            tree=args.tree,
            events=args.events,
            seed=args.seed,
            chunk=args.chunk,
            branches=args.branches,
            compression=args.compression,
            verbose=not args.quiet,
        )
    except EvflowError as e:
        print(f"evflow: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
