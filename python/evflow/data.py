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
    arrays = t.arrays(names, library="ak", how=dict)
    return arrays


def _root_groups(arrays: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Groups jagged branches ``P_x`` with equal counts into records ``P``
    (uproot then writes ``nP``, ``P_x``, ...). Returns the dict to write and
    the branches left out (strings and other types ROOT output can't take)."""
    import awkward as ak
    import numpy as np

    flat: dict[str, Any] = {}
    jagged: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for name, a in arrays.items():
        t = str(ak.type(a).content)
        if "string" in t or "?" in t or "union" in t:
            skipped.append(name)
            continue
        if a.ndim == 1:
            flat[name] = a
        elif a.ndim == 2 and "_" in name:
            prefix, field = name.split("_", 1)
            jagged.setdefault(prefix, {})[field] = a
        else:
            skipped.append(name)
    out: dict[str, Any] = {}
    for prefix, fields in jagged.items():
        groups: list[dict[str, Any]] = []
        for field, a in fields.items():
            counts = ak.to_numpy(ak.num(a))
            for g in groups:
                if np.array_equal(g["counts"], counts):
                    g["fields"][field] = a
                    break
            else:
                groups.append({"counts": counts, "fields": {field: a}})
        for i, g in enumerate(groups):
            name = prefix if i == 0 else f"{prefix}{i}"
            counter = f"n{name}"
            if counter in flat:
                if not np.array_equal(ak.to_numpy(flat[counter]), g["counts"]):
                    skipped.append(counter)
                flat.pop(counter)
            if len(g["fields"]) == 1 and i > 0:
                ((field, a),) = g["fields"].items()
                out[f"{prefix}_{field}"] = a
            else:
                out[name] = ak.zip(g["fields"])
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
            if skipped and verbose:
                print(f"not written to ROOT (unsupported type): {skipped}", file=sys.stderr)
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
