"""The eight ADL benchmark queries (iris-hep/adl-benchmarks-index) as evflow
analyses, on CMS NanoAOD branch names.

1. MET of all events;
2. pT of all jets;
3. pT of the jets with |η| < 1;
4. MET of the events with at least two jets with pT > 40 GeV;
5. MET of the events with an opposite-charge muon pair of invariant mass
   60–120 GeV;
6. in events with at least three jets, the pT of the trijet whose mass is
   closest to 172.5 GeV, and the largest b-tag discriminant among its jets;
7. per event, the scalar sum of the pT of the jets with pT > 30 GeV that are
   not within ΔR 0.4 of any light lepton (electron or muon) with pT > 10 GeV;
8. in events with at least three light leptons and a same-flavour
   opposite-charge pair, the transverse mass of MET and the highest-pT light
   lepton that is not in the same-flavour opposite-charge pair whose mass is
   closest to 91.2 GeV.

Histogram binning is that of the benchmark's RDataFrame reference
implementation (the artifact of Graur et al., PVLDB 15(2), 2022): 100 bins
each, MET 0–2000 GeV, jet pT 15–60 GeV, trijet pT 15–40 GeV, b-tag 0–1,
ΣpT 15–200 GeV, mT 15–250 GeV.

Queries 5 to 8 loop over pairs and triplets of objects per event: they run as
per-event numba kernels compiled with ``nogil=True`` (so several batches
progress at once on evflow's threads) when numba is installed, and as plain
awkward-array code otherwise (``kernels="awkward"`` forces that). Both give
the same histograms. Every kernel computes in float64, with the same
operations in the same order as the awkward version.

Usage::

    python examples/adl/adl.py --input events.parquet --threads 2           # all eight, a table
    python examples/adl/adl.py --queries 6 8 --input events.root --kernels awkward
    python examples/adl/adl.py --one-pass --input events.parquet -j 2   # all eight, one read
    python -m evflow run examples/adl/adl.py --process q6 --input events.root -j 2
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import evflow as ef

DATA = Path(
    os.environ.get("EVFLOW_HEP_DATA", Path(__file__).resolve().parents[3] / "shared" / "data" / "hep")
)
NANOAOD = DATA / "nanoAOD_2015_CMS_Open_Data_ttbar.root"

#: b-tag discriminant of query 6 (the CSV algorithm, as ``Jet_btag`` of the 2012 benchmark file).
BTAG = "Jet_btagCSVV2"

#: The branches the eight queries read (the benchmark datasets keep these and a few more).
BRANCHES = [
    "MET_pt", "MET_phi", "nJet", "Jet_pt", "Jet_eta", "Jet_phi", "Jet_mass", BTAG,
    "nMuon", "Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass", "Muon_charge",
    "nElectron", "Electron_pt", "Electron_eta", "Electron_phi", "Electron_mass", "Electron_charge",
]  # fmt: skip

#: (bins, low, high) of each histogram, as in the reference implementation.
BINNING: dict[str, tuple[int, float, float]] = {
    "q1_met": (100, 0.0, 2000.0),
    "q2_jet_pt": (100, 15.0, 60.0),
    "q3_jet_pt": (100, 15.0, 60.0),
    "q4_met": (100, 0.0, 2000.0),
    "q5_met": (100, 0.0, 2000.0),
    "q6_trijet_pt": (100, 15.0, 40.0),
    "q6_trijet_btag": (100, 0.0, 1.0),
    "q7_sum_pt": (100, 15.0, 200.0),
    "q8_mt": (100, 15.0, 250.0),
}

Files = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

# --------------------------------------------------------------------------- jagged helpers


def lists(x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, stops, content)`` numpy views of a jagged array of numbers:
    event ``i``'s values are ``content[starts[i]:stops[i]]``. No copy for the
    layouts evflow hands to modules (list offsets, or lists selected by a filter)."""
    layout = ak.to_layout(x)
    if isinstance(layout, ak.contents.ListOffsetArray) and isinstance(layout.content, ak.contents.NumpyArray):
        offsets = np.asarray(layout.offsets.data)
        return offsets[:-1], offsets[1:], np.asarray(layout.content.data)
    if isinstance(layout, ak.contents.ListArray) and isinstance(layout.content, ak.contents.NumpyArray):
        return np.asarray(layout.starts.data), np.asarray(layout.stops.data), np.asarray(layout.content.data)
    return lists(ak.to_packed(x))


def flat(x: Any) -> np.ndarray:
    """Every value of a jagged array, event after event, as numpy."""
    starts, stops, content = lists(x)
    if len(starts) == 0:
        return content[:0]
    if np.array_equal(starts[1:], stops[:-1]):
        return content[starts[0] : stops[-1]]
    return ak.to_numpy(ak.flatten(x))


def _same_lists(*columns: Any) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Starts, stops and contents of columns of one collection (``Muon_pt``,
    ``Muon_eta``, ...), checked to share their list boundaries."""
    parts = [lists(c) for c in columns]
    starts, stops, _ = parts[0]
    for s, e, _ in parts[1:]:
        if not (np.array_equal(s, starts) and np.array_equal(e, stops)):
            # Same counts, different buffers: re-pack every column once.
            packed = [lists(ak.to_packed(c)) for c in columns]
            return packed[0][0], packed[0][1], [p[2] for p in packed]
    return starts, stops, [p[2] for p in parts]


# --------------------------------------------------------------------------- four-vectors


def p4(pt: np.ndarray, eta: np.ndarray, phi: np.ndarray, mass: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(px, py, pz, E)`` in float64 of flat (pT, η, φ, m) arrays, with numpy
    (vectorised, without the GIL). Every version of the queries (numba,
    awkward, the tests' reference) derives its four-vectors from these same
    operations, so they agree bit for bit."""
    pt, eta, phi, mass = (np.asarray(c, dtype=np.float64) for c in (pt, eta, phi, mass))
    px = pt * np.cos(phi)
    py = pt * np.sin(phi)
    pz = pt * np.sinh(eta)
    return px, py, pz, np.sqrt(px * px + py * py + pz * pz + mass * mass)


def mass_of(px: Any, py: Any, pz: Any, e: Any) -> Any:
    """Invariant mass of summed four-vectors (numpy or awkward)."""
    return np.sqrt(np.maximum(e * e - px * px - py * py - pz * pz, 0.0))


# --------------------------------------------------------------------------- numba kernels


def _load_kernels() -> Any:
    """examples/adl/kernels.py as the module ``evflow_adl_kernels`` (one
    name, whatever name adl.py has: numba's on-disk cache refers to it)."""
    name = "evflow_adl_kernels"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("kernels.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_kernels = _load_kernels()
HAVE_NUMBA: bool = _kernels.HAVE_NUMBA


# --------------------------------------------------------------------------- awkward versions


def _ak_p4(pt: Any, eta: Any, phi: Any, mass: Any) -> dict[str, ak.Array]:
    """``p4`` on the flat contents, wrapped back into the events' lists."""
    counts = ak.num(pt)
    parts = p4(*(ak.to_numpy(ak.flatten(c)) for c in (pt, eta, phi, mass)))
    return {k: ak.unflatten(v, counts) for k, v in zip(("px", "py", "pz", "e"), parts, strict=True)}


def _ak_q5(pt: Any, eta: Any, phi: Any, mass: Any, charge: Any) -> np.ndarray:
    mu = ak.zip({**_ak_p4(pt, eta, phi, mass), "q": charge})
    a, b = ak.unzip(ak.combinations(mu, 2))
    m = mass_of(a.px + b.px, a.py + b.py, a.pz + b.pz, a.e + b.e)
    return ak.to_numpy(ak.any((a.q != b.q) & (m > 60.0) & (m < 120.0), axis=1))


def _ak_q6(pt: Any, eta: Any, phi: Any, mass: Any, btag: Any) -> tuple[np.ndarray, np.ndarray]:
    jets = ak.zip({**_ak_p4(pt, eta, phi, mass), "btag": ak.values_astype(btag, np.float64)})
    a, b, c = ak.unzip(ak.combinations(jets, 3))
    tx, ty = (a.px + b.px) + c.px, (a.py + b.py) + c.py
    m = mass_of(tx, ty, (a.pz + b.pz) + c.pz, (a.e + b.e) + c.e)
    best = ak.argmin(abs(m - 172.5), axis=1, keepdims=True)
    tri_pt = np.sqrt(tx * tx + ty * ty)
    tri_btag = np.maximum(np.maximum(a.btag, b.btag), c.btag)
    return (
        ak.to_numpy(ak.fill_none(ak.firsts(tri_pt[best]), np.nan)),
        ak.to_numpy(ak.fill_none(ak.firsts(tri_btag[best]), np.nan)),
    )


def _ak_q7(jets: dict[str, Any], leptons: list[dict[str, Any]]) -> np.ndarray:
    def f64(x: Any) -> Any:
        return ak.values_astype(x, np.float64)

    jet = ak.zip({k: f64(jets[k]) for k in ("pt", "eta", "phi")})
    keep = jet.pt > 30.0
    for lep in leptons:
        good = lep["pt"] > 10.0
        lz = ak.zip({k: f64(lep[k][good]) for k in ("eta", "phi")})
        j, lp = ak.unzip(ak.cartesian([jet, lz], nested=True))
        de = j.eta - lp.eta
        dp = j.phi - lp.phi
        dp = ak.where(dp > np.pi, dp - 2 * np.pi, ak.where(dp < -np.pi, dp + 2 * np.pi, dp))
        keep = keep & ~ak.any(np.sqrt(de * de + dp * dp) < 0.4, axis=2)
    return ak.to_numpy(ak.sum(jet.pt[keep], axis=1))


def _ak_q8(el: dict[str, Any], mu: dict[str, Any], met: Any, met_phi: Any) -> tuple[np.ndarray, np.ndarray]:
    def coll(c: dict[str, Any], flavour: int) -> ak.Array:
        return ak.zip(
            {
                **_ak_p4(c["pt"], c["eta"], c["phi"], c["mass"]),
                "pt": ak.values_astype(c["pt"], np.float64),
                "phi": ak.values_astype(c["phi"], np.float64),
                "q": c["charge"],
                "flavour": ak.values_astype(c["charge"] * 0 + flavour, np.int8),
            }
        )

    lep = ak.concatenate([coll(el, 0), coll(mu, 1)], axis=1)
    idx = ak.local_index(lep, axis=1)
    ia, ib = ak.unzip(ak.argcombinations(lep, 2))
    a, b = lep[ia], lep[ib]
    sfos = (a.flavour == b.flavour) & (a.q != b.q)
    d = ak.where(sfos, abs(mass_of(a.px + b.px, a.py + b.py, a.pz + b.pz, a.e + b.e) - 91.2), np.inf)
    best = ak.argmin(d, axis=1, keepdims=True)
    has = ak.fill_none(ak.firsts(sfos[best]), False)
    p1 = ak.fill_none(ak.firsts(ia[best]), -1)
    p2 = ak.fill_none(ak.firsts(ib[best]), -1)
    others = lep[(idx != p1) & (idx != p2)]
    lead = ak.argmax(others.pt, axis=1, keepdims=True)
    has = ak.to_numpy(has & (ak.num(others) > 0))
    lead_pt = ak.to_numpy(ak.fill_none(ak.firsts(others.pt[lead]), np.nan))
    lead_phi = ak.to_numpy(ak.fill_none(ak.firsts(others.phi[lead]), np.nan))
    met = np.asarray(met, dtype=np.float64)
    mt = np.sqrt(2.0 * lead_pt * met * (1.0 - np.cos(lead_phi - np.asarray(met_phi, dtype=np.float64))))
    return has, np.where(has, mt, np.nan)


# --------------------------------------------------------------------------- the queries


def _use_numba(kernels: str) -> bool:
    if kernels not in ("auto", "numba", "awkward"):
        raise ValueError(f"kernels must be 'auto', 'numba' or 'awkward', not {kernels!r}")
    if kernels == "numba" and not HAVE_NUMBA:
        raise ImportError("kernels='numba' needs numba (pip install numba)")
    return HAVE_NUMBA and kernels != "awkward"


def _hist(proc: ef.Process, name: str, column: str | None = None, **kw: Any) -> None:
    bins, lo, hi = BINNING[name]
    proc.histogram(name, column, bins=bins, range=(lo, hi), **kw)


def make_process(
    query: int,
    files: Files = NANOAOD,
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    kernels: str = "auto",
    max_events: int | None = None,
) -> ef.Process:
    """ADL benchmark query ``query`` (1 to 8) on ``files`` (ROOT or Parquet)."""
    builders = {1: _q1, 2: _q2, 3: _q3, 4: _q4, 5: _q5, 6: _q6, 7: _q7, 8: _q8}
    if query not in builders:
        raise ValueError(f"query must be 1 to 8, not {query}")
    proc = ef.Process(f"q{query}")
    proc.source = ef.source.auto(files, tree=tree, step_size=step_size, max_events=max_events)
    builders[query](proc, _use_numba(kernels))
    return proc


def make_one_pass(
    files: Files = NANOAOD,
    queries: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8),
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    kernels: str = "auto",
    max_events: int | None = None,
) -> ef.Process:
    """Every query of ``queries`` in one process: one read of each column of
    each batch serves all of them, their paths and histograms side by side
    (the histograms are those of the queries run one by one)."""
    builders = {1: _q1, 2: _q2, 3: _q3, 4: _q4, 5: _q5, 6: _q6, 7: _q7, 8: _q8}
    unknown = [q for q in queries if q not in builders]
    if unknown:
        raise ValueError(f"queries must be 1 to 8, not {unknown}")
    proc = ef.Process("adl")
    proc.source = ef.source.auto(files, tree=tree, step_size=step_size, max_events=max_events)
    fast = _use_numba(kernels)
    for q in queries:
        builders[q](proc, fast)
    return proc


def _q1(proc: ef.Process, fast: bool) -> None:
    _hist(proc, "q1_met", "MET_pt", label=r"$E_T^{miss}$ [GeV]")


def _q2(proc: ef.Process, fast: bool) -> None:
    _hist(proc, "q2_jet_pt", fill=lambda ev: flat(ev.Jet_pt), consumes=["Jet_pt"], label=r"jet $p_T$ [GeV]")


def _q3(proc: ef.Process, fast: bool) -> None:
    def central_jet_pt(ev: ef.Events) -> np.ndarray:
        pt, eta = flat(ev.Jet_pt), flat(ev.Jet_eta)
        return pt[np.abs(eta) < 1]

    _hist(
        proc,
        "q3_jet_pt",
        fill=central_jet_pt,
        consumes=["Jet_pt", "Jet_eta"],
        label=r"jet $p_T$, $|\eta|<1$ [GeV]",
    )


def _q4(proc: ef.Process, fast: bool) -> None:
    @proc.filter(consumes=["Jet_pt"])
    def two_jets_40(ev: ef.Events) -> np.ndarray:
        starts, stops, pt = lists(ev.Jet_pt)
        above = np.concatenate([[0], np.cumsum(pt > 40, dtype=np.int64)])
        return above[stops] - above[starts] >= 2

    proc.path("q4", [two_jets_40])
    _hist(proc, "q4_met", "MET_pt", after="q4", label=r"$E_T^{miss}$ [GeV]")


def _q5(proc: ef.Process, fast: bool) -> None:
    @proc.filter(consumes=["nMuon"])
    def two_muons(ev: ef.Events) -> np.ndarray:
        return ev.nMuon >= 2

    muon = ["Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass", "Muon_charge"]

    @proc.filter(consumes=muon)
    def z_pair(ev: ef.Events) -> np.ndarray:
        cols = [ev[c] for c in muon]
        if not fast:
            return _ak_q5(*cols)
        starts, stops, (pt, eta, phi, mass, charge) = _same_lists(*cols)
        out = np.empty(len(starts), dtype=np.bool_)
        _kernels.q5_kernel(starts, stops, *p4(pt, eta, phi, mass), charge, out)
        return out

    proc.path("q5", [two_muons, z_pair])
    _hist(proc, "q5_met", "MET_pt", after="q5", label=r"$E_T^{miss}$ [GeV]")


def _q6(proc: ef.Process, fast: bool) -> None:
    @proc.filter(consumes=["nJet"])
    def three_jets(ev: ef.Events) -> np.ndarray:
        return ev.nJet >= 3

    jet = ["Jet_pt", "Jet_eta", "Jet_phi", "Jet_mass", BTAG]

    @proc.producer(consumes=jet, produces=["trijet_pt", "trijet_btag"])
    def trijet(ev: ef.Events) -> dict[str, np.ndarray]:
        cols = [ev[c] for c in jet]
        if not fast:
            tpt, tb = _ak_q6(*cols)
        else:
            starts, stops, (pt, eta, phi, mass, btag) = _same_lists(*cols)
            tpt, tb = np.empty(len(starts)), np.empty(len(starts))
            _kernels.q6_kernel(starts, stops, *p4(pt, eta, phi, mass), btag, tpt, tb)
        return {"trijet_pt": tpt, "trijet_btag": tb}

    proc.path("q6", [three_jets])
    _hist(proc, "q6_trijet_pt", "trijet_pt", after="q6", label=r"trijet $p_T$ [GeV]")
    _hist(proc, "q6_trijet_btag", "trijet_btag", after="q6", label="largest b-tag in the trijet")


def _q7(proc: ef.Process, fast: bool) -> None:
    cols = [
        *("Jet_pt", "Jet_eta", "Jet_phi"),
        *("Electron_pt", "Electron_eta", "Electron_phi"),
        *("Muon_pt", "Muon_eta", "Muon_phi"),
    ]

    @proc.producer(consumes=cols, produces=["sum_pt"])
    def isolated_jet_sum_pt(ev: ef.Events) -> np.ndarray:
        if not fast:
            jets = {k: ev[f"Jet_{k}"] for k in ("pt", "eta", "phi")}
            leptons = [{k: ev[f"{p}_{k}"] for k in ("pt", "eta", "phi")} for p in ("Electron", "Muon")]
            return _ak_q7(jets, leptons)
        js, je, j = _same_lists(ev.Jet_pt, ev.Jet_eta, ev.Jet_phi)
        es, ee, e = _same_lists(ev.Electron_pt, ev.Electron_eta, ev.Electron_phi)
        ms, me, m = _same_lists(ev.Muon_pt, ev.Muon_eta, ev.Muon_phi)
        out = np.empty(len(js))
        _kernels.q7_kernel(js, je, *j, es, ee, *e, ms, me, *m, out)
        return out

    _hist(proc, "q7_sum_pt", "sum_pt", label=r"$\sum p_T$ of jets away from leptons [GeV]")


def _q8(proc: ef.Process, fast: bool) -> None:
    @proc.filter(consumes=["nElectron", "nMuon"])
    def three_leptons(ev: ef.Events) -> np.ndarray:
        return ev.nElectron.astype(np.int64) + ev.nMuon >= 3

    fields = ("pt", "eta", "phi", "mass", "charge")
    cols = [f"{p}_{k}" for p in ("Electron", "Muon") for k in fields] + ["MET_pt", "MET_phi"]

    @proc.producer(consumes=cols, produces=["sfos", "mt"])
    def transverse_mass(ev: ef.Events) -> dict[str, np.ndarray]:
        if not fast:
            el = {k: ev[f"Electron_{k}"] for k in fields}
            mu = {k: ev[f"Muon_{k}"] for k in fields}
            has, mt = _ak_q8(el, mu, ev.MET_pt, ev.MET_phi)
            return {"sfos": has, "mt": mt}
        # Electrons then muons, each packed (offsets from 0) and joined into one flat array per field.
        el = ak.to_packed(ak.zip({k: ev[f"Electron_{k}"] for k in fields}))
        mu = ak.to_packed(ak.zip({k: ev[f"Muon_{k}"] for k in fields}))
        eo, mo = np.asarray(el.layout.offsets.data), np.asarray(mu.layout.offsets.data)
        joined = {
            k: np.concatenate([ak.to_numpy(el[k].layout.content), ak.to_numpy(mu[k].layout.content)])
            for k in fields
        }
        px, py, pz, e = p4(joined["pt"], joined["eta"], joined["phi"], joined["mass"])
        has, mt = np.empty(len(eo) - 1, dtype=np.bool_), np.empty(len(eo) - 1)
        _kernels.q8_kernel(eo[:-1], eo[1:], mo[:-1], mo[1:], px, py, pz, e,
                   joined["pt"].astype(np.float64), joined["phi"].astype(np.float64), joined["charge"],
                   ev.MET_pt, ev.MET_phi, has, mt)  # fmt: skip
        return {"sfos": has, "mt": mt}

    @proc.filter(consumes=["sfos"])
    def sfos_pair(ev: ef.Events) -> np.ndarray:
        return ev.sfos

    proc.path("q8", [three_leptons, sfos_pair])
    _hist(proc, "q8_mt", "mt", after="q8", label=r"$m_T$(MET, leading other lepton) [GeV]")


QUERIES = tuple(range(1, 9))

# One module-level Process per query on the small real file, for
# ``python -m evflow run examples/adl/adl.py --process q6 --input FILE``.
q1, q2, q3, q4, q5, q6, q7, q8 = (make_process(q) for q in QUERIES)


def histograms(query: int) -> list[str]:
    """Names of the histograms query ``query`` fills."""
    return [name for name in BINNING if name.startswith(f"q{query}_")]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", nargs="+", default=[str(NANOAOD)], help="ROOT or Parquet files")
    p.add_argument("--queries", nargs="+", type=int, default=list(QUERIES))
    p.add_argument("--threads", "-j", type=int, default=2)
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--kernels", default="auto", choices=["auto", "numba", "awkward"])
    p.add_argument("--plot", default=None, help="write PNGs of the histograms into this folder")
    p.add_argument("--one-pass", action="store_true", help="all the queries in one process (one read)")
    args = p.parse_args(argv)
    print(f"kernels: {'numba' if _use_numba(args.kernels) else 'awkward'}\n")
    print("| query | events | s | events/s | histogram entries |")
    print("| --- | ---: | ---: | ---: | ---: |")
    if args.one_pass:
        proc = make_one_pass(args.input, args.queries, step_size=args.step_size, kernels=args.kernels)
        t0 = time.perf_counter()
        r = proc.run(threads=args.threads)
        wall = time.perf_counter() - t0
        entries = ", ".join(f"{h}: {r.histograms[h].sum():.0f}" for q in args.queries for h in histograms(q))
        names = "+".join(f"Q{q}" for q in args.queries)
        print(f"| {names} (one pass) | {r.events} | {wall:.3f} | {r.events / wall:,.0f} | {entries} |")
        if args.plot:
            r.plot(args.plot)
        return 0
    for q in args.queries:
        proc = make_process(q, args.input, step_size=args.step_size, kernels=args.kernels)
        t0 = time.perf_counter()
        r = proc.run(threads=args.threads)
        wall = time.perf_counter() - t0
        entries = ", ".join(f"{h}: {r.histograms[h].sum():.0f}" for h in histograms(q))
        print(f"| Q{q} | {r.events} | {wall:.3f} | {r.events / wall:,.0f} | {entries} |")
        if args.plot:
            r.plot(args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
