"""``skip_bad_files=True`` with a file whose data fail to be read during the
job: the cost of leaving it out as the job goes on, against the second
pass it took before (a run that fails on the file, then the job again
without it), and against a run that never had the file.

One command::

    python bench/bad_file.py                       # 6 ROOT files of 200 000 events, file 3 corrupt
    python bench/bad_file.py --files 8 --events 400000 --runs 3
    python bench/bad_file.py --format parquet --only one-process   # the native Parquet reader

Inputs (made once in ``--data-dir``, by default ``evflow-bad-file`` in the
temporary directory): ``--files`` ROOT files of
``--events`` events (a float, a weight and a jagged branch, clusters of
``--step`` entries), or with ``--format parquet`` Parquet files (the same
columns, zstd, row groups of ``--step`` rows, read by the native reader);
in a copy of the middle file, the last basket of one branch (the last row
group) does not decompress, so that nearly all of its batches ran before
the failure (the second pass's worst case; its best case, a failure in the
first basket, costs the first pass about nothing).

Prints, per setting (one single-threaded process; a ``LocalCluster`` of
``--processes`` single-threaded worker processes, chunks of
``--chunk-size`` events; ``--only`` one of them), the wall time of:

* ``no second pass``: ``proc.run(skip_bad_files=True)`` (this version);
* ``second pass``: what the job cost before: the run that stops on the
  file (``skip_bad_files`` off: the same first pass, up to the failure)
  plus the run of the files without it;
* ``without the file``: the run of the good files only (the floor);

and checks that the first and the last give the same histograms, bit for
bit. Runs alternate between the three, ``--runs`` times; the best of each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import evflow as ef


def _write(path: Path, seed: int, events: int, step: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, size=events)
    cols = {
        "x": rng.normal(size=events),
        "w": rng.uniform(0.5, 1.5, size=events),
        "pt": ak.unflatten(rng.exponential(30.0, size=int(counts.sum())), counts),
    }
    tmp = path.with_suffix(".tmp")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pt = ak.to_arrow(cols["pt"], extensionarray=False)
        table = pa.table({"x": cols["x"], "w": cols["w"], "pt": pt})
        pq.write_table(table, tmp, row_group_size=step, compression="zstd")
    else:
        import uproot

        with uproot.recreate(tmp, compression=uproot.ZLIB(4)) as f:
            f.mktree("t", {"x": np.float64, "w": np.float64, "pt": "var * float64"})
            for a in range(0, events, step):
                f["t"].extend({c: v[a : a + step] for c, v in cols.items()})
    os.replace(tmp, path)


def _last_data(path: str) -> tuple[int, int]:
    """Where the last basket of ``x`` (the last row group's ``x``) starts
    and its compressed size."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        column = meta.row_group(meta.num_row_groups - 1).column(0)
        start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
        return int(start), int(column.total_compressed_size)
    import uproot

    branch = uproot.open(path)["t"]["x"]
    last = branch.num_baskets - 1
    return int(branch.member("fBasketSeek")[last]), int(branch.basket_compressed_bytes(last))


def make_inputs(d: Path, files: int, events: int, step: int, fmt: str = "root") -> tuple[list[str], int]:
    """The files (the middle one corrupt in its last basket, or row group,
    of ``x``) and the index of the corrupt one."""
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(files):
        p = d / f"events-{events}-{step}-{k}.{fmt}"
        if not p.exists():
            _write(p, k, events, step)
        paths.append(str(p))
    bad = files // 2
    corrupt = d / f"events-{events}-{step}-{bad}-corrupt.{fmt}"
    if not corrupt.exists():
        data = bytearray(Path(paths[bad]).read_bytes())
        seek, size = _last_data(paths[bad])
        start = seek + size // 2  # inside the compressed payload
        data[start : start + 64] = bytes(64)
        corrupt.write_bytes(bytes(data))
    paths[bad] = str(corrupt)
    return paths, bad


def analysis(files: list[str], step: int, skim: str) -> ef.Process:
    proc = ef.Process("bad_file_bench")
    if files[0].endswith(".parquet"):
        proc.source = ef.source.parquet(files, step_size=step)  # the native reader
    else:
        proc.source = ef.source.root(files, tree="t", step_size=step)
    proc.weight = "w"

    @proc.producer(consumes=["pt"], produces=["ht", "lead"])
    def jets(ev: ef.Events) -> dict[str, Any]:
        pt = ev.pt
        return {"ht": ak.sum(pt, axis=1), "lead": ak.fill_none(ak.max(pt, axis=1), 0.0)}

    @proc.filter(consumes=["ht"])
    def busy(ev: ef.Events) -> Any:
        return ev.ht > 20

    @proc.filter(consumes=["x"])
    def central(ev: ef.Events) -> Any:
        return np.abs(ev.x) < 2

    proc.path("sel", [busy, central], reorderable=True)
    proc.histogram("ht", "ht", bins=100, range=(0, 400), weight=True, after="sel")
    proc.histogram("lead", "lead", bins=100, range=(0, 200), after="sel")
    proc.histogram("x", "x", bins=100, range=(-4, 4), weight=True)
    proc.output(ef.output.parquet(skim, columns=["x", "ht"]), select="sel")
    return proc


def timed(files: list[str], step: int, skim: str, options: dict[str, Any], **more: Any) -> tuple[float, Any]:
    """The wall time and result of one run (``None``: it failed on the corrupt file)."""
    t0 = time.perf_counter()
    try:
        out = analysis(files, step, skim).run(**options, **more)
    except ef.JobError:
        out = None
    return time.perf_counter() - t0, out


def cost(good: list[str], args: argparse.Namespace, settings: dict[str, Any], d: Path) -> int:
    """The good files alone, ``skip_bad_files`` on and off, alternating: on a
    cluster, chunks are cut at the boundaries of files they hold part of."""
    print(f"{len(good)} good files of {args.events} events, steps of {args.step}, best of {args.runs}")
    print(f"{'setting':<22} {'skip_bad_files off':>19} {'on':>8} {'chunks off, on':>15} {'on / off':>9}")
    for name, options in settings.items():
        skim = str(d / ("skim.parquet" if "client" not in options else "skim"))
        timed(good, args.step, skim, options)  # warm
        best = {False: float("inf"), True: float("inf")}
        chunks: dict[bool, int] = {}
        for _ in range(args.runs):
            for skip in (False, True):
                t, r = timed(good, args.step, skim, options, skip_bad_files=skip)
                best[skip] = min(best[skip], t)
                chunks[skip] = len(r.report.get("distributed", {}).get("chunks", []))
        shown = f"{chunks[False]}, {chunks[True]}" if chunks[False] else "-"
        ratio = best[True] / best[False]
        print(f"{name:<22} {best[False]:>18.2f}s {best[True]:>7.2f}s {shown:>15} {ratio:>8.2f}x")
    return 0


def _at_least(low: int) -> Any:
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        return value

    return check


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=_at_least(2), default=6, help="input files (one of them corrupt)")
    p.add_argument("--events", type=_at_least(1), default=200_000, help="events per file")
    p.add_argument("--step", type=_at_least(1), default=50_000, help="step size and cluster (row group) size")
    p.add_argument("--format", choices=["root", "parquet"], default="root", help="input files")
    p.add_argument("--only", choices=["one-process", "cluster"], help="one setting (default: both)")
    p.add_argument("--processes", type=_at_least(1), default=2)
    p.add_argument("--chunk-size", type=_at_least(1), default=100_000)
    p.add_argument("--runs", type=_at_least(1), default=2)
    default_dir = os.path.join(tempfile.gettempdir(), "evflow-bad-file")
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", default_dir))
    p.add_argument(
        "--cost",
        action="store_true",
        help="no corrupt file: the good files with skip_bad_files on and off (what the option costs)",
    )
    args = p.parse_args()

    d = Path(args.data_dir)
    files, bad = make_inputs(d, args.files, args.events, args.step, args.format)
    good = files[:bad] + files[bad + 1 :]
    settings: dict[str, dict[str, Any]] = {}
    if args.only != "cluster":
        settings["one process"] = {"threads": 1}
    cluster = client = None
    if args.only != "one-process":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=args.processes,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=40,
        )
        client = Client(cluster)
        settings[f"{args.processes} worker processes"] = {"client": client, "chunk_size": args.chunk_size}
    if args.cost:
        try:
            return cost(good, args, settings, d)
        finally:
            if client is not None:
                client.close()
                cluster.close()
    where = "last row group" if args.format == "parquet" else "last basket"
    print(
        f"{args.files} {args.format} files of {args.events} events (file {bad} corrupt in its {where}), "
        f"steps of {args.step}, best of {args.runs}"
    )
    print(f"{'setting':<22} {'no second pass':>15} {'second pass':>12} {'without the file':>17} {'ratio':>6}")
    try:
        for name, options in settings.items():
            skim = str(d / ("skim.parquet" if "client" not in options else "skim"))
            best = {"new": float("inf"), "old": float("inf"), "clean": float("inf")}
            timed(good, args.step, skim, options)  # warm: the workers built the analysis, files cached
            for _ in range(args.runs):
                t_new, new = timed(files, args.step, skim, options, skip_bad_files=True)
                assert new is not None and new.skipped_files == [files[bad]]
                t_fail, failed = timed(files, args.step, skim, options)  # the first pass, up to the failure
                assert failed is None, "the corrupt file did not fail the run"
                t_clean, clean = timed(good, args.step, skim, options)
                for h, c in clean.histograms.items():
                    assert np.array_equal(c.values(flow=True), new.histograms[h].values(flow=True)), h
                best["new"] = min(best["new"], t_new)
                best["old"] = min(best["old"], t_fail + t_clean)
                best["clean"] = min(best["clean"], t_clean)
            ratio = best["old"] / best["new"]
            print(
                f"{name:<22} {best['new']:>14.2f}s {best['old']:>11.2f}s {best['clean']:>16.2f}s {ratio:>5.2f}x"
            )
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
