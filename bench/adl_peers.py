"""The peers of bench/adl.py: the eight ADL benchmark queries as a plain
uproot/pyarrow + awkward single-process loop, and as coffea processors
(NanoEvents, awkward style) run by coffea's futures executor.

The plain loop is the *reference*: it computes every quantity with the same
float64 operations as examples/adl/adl.py (four-vectors from pT, η, φ, m as
(pT cos φ, pT sin φ, pT sinh η, E)), so its histograms must equal evflow's bin
by bin. coffea computes with its own vector behaviours (in the inputs'
float32 where they are float32), as a coffea user would; its histograms are
compared and any difference reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import hist
import numpy as np

BTAG = "Jet_btagCSVV2"

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


def new_hists(query: int) -> dict[str, hist.Hist]:
    return {
        name: hist.Hist(hist.axis.Regular(bins, lo, hi))
        for name, (bins, lo, hi) in BINNING.items()
        if name.startswith(f"q{query}_")
    }


# --------------------------------------------------------------------------- plain loop

COLUMNS: dict[int, list[str]] = {
    1: ["MET_pt"],
    2: ["Jet_pt"],
    3: ["Jet_pt", "Jet_eta"],
    4: ["Jet_pt", "MET_pt"],
    5: ["nMuon", "Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass", "Muon_charge", "MET_pt"],
    6: ["nJet", "Jet_pt", "Jet_eta", "Jet_phi", "Jet_mass", BTAG],
    7: [f"{p}_{k}" for p in ("Jet", "Electron", "Muon") for k in ("pt", "eta", "phi")],
    8: [f"{p}_{k}" for p in ("Electron", "Muon") for k in ("pt", "eta", "phi", "mass", "charge")]
    + ["MET_pt", "MET_phi"],
}


def batches(path: Path, columns: list[str], step: int) -> Iterator[dict[str, Any]]:
    """The columns of ``path``, ``step`` events at a time (uproot for ROOT,
    pyarrow for Parquet)."""
    if path.suffix == ".root":
        import uproot

        yield from uproot.iterate(f"{path}:Events", columns, step_size=step, library="ak", how=dict)
    else:
        import pyarrow.parquet as pq

        for rb in pq.ParquetFile(path).iter_batches(batch_size=step, columns=columns):
            yield {c: ak.from_arrow(rb.column(c)) for c in columns}


def _p4(b: dict[str, Any], prefix: str) -> dict[str, Any]:
    n = ak.num(b[f"{prefix}_pt"])
    pt, eta, phi, m = (
        ak.to_numpy(ak.flatten(b[f"{prefix}_{k}"])).astype(np.float64) for k in ("pt", "eta", "phi", "mass")
    )
    px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    e = np.sqrt(px * px + py * py + pz * pz + m * m)
    return {k: ak.unflatten(v, n) for k, v in (("px", px), ("py", py), ("pz", pz), ("e", e))}


def _mass(px: Any, py: Any, pz: Any, e: Any) -> Any:
    return np.sqrt(np.maximum(e * e - px * px - py * py - pz * pz, 0.0))


def _f64(x: Any) -> Any:
    return ak.values_astype(x, np.float64)


def plain_fill(query: int, b: dict[str, Any], h: dict[str, hist.Hist]) -> None:
    """One batch of query ``query`` into the histograms ``h``."""
    if query == 1:
        h["q1_met"].fill(ak.to_numpy(b["MET_pt"]))
    elif query == 2:
        h["q2_jet_pt"].fill(ak.to_numpy(ak.flatten(b["Jet_pt"])))
    elif query == 3:
        h["q3_jet_pt"].fill(ak.to_numpy(ak.flatten(b["Jet_pt"][abs(b["Jet_eta"]) < 1])))
    elif query == 4:
        keep = ak.to_numpy(ak.sum(b["Jet_pt"] > 40, axis=1) >= 2)
        h["q4_met"].fill(ak.to_numpy(b["MET_pt"])[keep])
    elif query == 5:
        keep = ak.to_numpy(b["nMuon"] >= 2)
        b = {k: v[keep] for k, v in b.items()}
        mu = ak.zip({**_p4(b, "Muon"), "q": b["Muon_charge"]})
        a, c = ak.unzip(ak.combinations(mu, 2))
        m = _mass(a.px + c.px, a.py + c.py, a.pz + c.pz, a.e + c.e)
        z = ak.to_numpy(ak.any((a.q != c.q) & (m > 60) & (m < 120), axis=1))
        h["q5_met"].fill(ak.to_numpy(b["MET_pt"])[z])
    elif query == 6:
        keep = ak.to_numpy(b["nJet"] >= 3)
        b = {k: v[keep] for k, v in b.items()}
        jets = ak.zip({**_p4(b, "Jet"), "btag": _f64(b[BTAG])})
        a, c, d = ak.unzip(ak.combinations(jets, 3))
        tx, ty = (a.px + c.px) + d.px, (a.py + c.py) + d.py
        m = _mass(tx, ty, (a.pz + c.pz) + d.pz, (a.e + c.e) + d.e)
        best = ak.argmin(abs(m - 172.5), axis=1, keepdims=True)
        h["q6_trijet_pt"].fill(ak.to_numpy(ak.flatten(np.sqrt(tx * tx + ty * ty)[best])))
        btag = np.maximum(np.maximum(a.btag, c.btag), d.btag)
        h["q6_trijet_btag"].fill(ak.to_numpy(ak.flatten(btag[best])))
    elif query == 7:
        jet = ak.zip({k: _f64(b[f"Jet_{k}"]) for k in ("pt", "eta", "phi")})
        keep = jet.pt > 30
        for lep in ("Electron", "Muon"):
            good = b[f"{lep}_pt"] > 10
            lz = ak.zip({k: _f64(b[f"{lep}_{k}"][good]) for k in ("eta", "phi")})
            j, lp = ak.unzip(ak.cartesian([jet, lz], nested=True))
            de, dp = j.eta - lp.eta, j.phi - lp.phi
            dp = ak.where(dp > np.pi, dp - 2 * np.pi, ak.where(dp < -np.pi, dp + 2 * np.pi, dp))
            keep = keep & ~ak.any(np.sqrt(de * de + dp * dp) < 0.4, axis=2)
        h["q7_sum_pt"].fill(ak.to_numpy(ak.sum(jet.pt[keep], axis=1)))
    elif query == 8:
        n = ak.to_numpy(ak.num(b["Electron_pt"]) + ak.num(b["Muon_pt"]))
        b = {k: v[n >= 3] for k, v in b.items()}

        def coll(prefix: str, flavour: int) -> ak.Array:
            q = b[f"{prefix}_charge"]
            return ak.zip(
                {
                    **_p4(b, prefix),
                    "pt": _f64(b[f"{prefix}_pt"]),
                    "phi": _f64(b[f"{prefix}_phi"]),
                    "q": q,
                    "flavour": q * 0 + flavour,
                }
            )

        lep = ak.concatenate([coll("Electron", 0), coll("Muon", 1)], axis=1)
        ia, ib = ak.unzip(ak.argcombinations(lep, 2))
        a, c = lep[ia], lep[ib]
        sfos = (a.flavour == c.flavour) & (a.q != c.q)
        d = ak.where(sfos, abs(_mass(a.px + c.px, a.py + c.py, a.pz + c.pz, a.e + c.e) - 91.2), np.inf)
        best = ak.argmin(d, axis=1, keepdims=True)
        has = ak.to_numpy(ak.fill_none(ak.any(sfos, axis=1), False))
        lep, ia, ib, best = lep[has], ia[has], ib[has], best[has]
        p1, p2 = ak.flatten(ia[best]), ak.flatten(ib[best])
        idx = ak.local_index(lep)
        others = lep[(idx != p1) & (idx != p2)]
        lead = ak.argmax(others.pt, axis=1, keepdims=True)
        lpt = ak.to_numpy(ak.flatten(others.pt[lead]))
        lphi = ak.to_numpy(ak.flatten(others.phi[lead]))
        met = ak.to_numpy(b["MET_pt"]).astype(np.float64)[has]
        mphi = ak.to_numpy(b["MET_phi"]).astype(np.float64)[has]
        h["q8_mt"].fill(np.sqrt(2.0 * lpt * met * (1.0 - np.cos(lphi - mphi))))


def plain_run(query: int, path: Path, step: int = 100_000) -> tuple[int, dict[str, hist.Hist]]:
    """The plain single-process loop: (events, histograms)."""
    h = new_hists(query)
    events = 0
    for b in batches(path, COLUMNS[query], step):
        events += len(next(iter(b.values())))
        plain_fill(query, b, h)
    return events, h


# --------------------------------------------------------------------------- coffea


def coffea_processor(query: int) -> Any:
    """A coffea processor of query ``query``, written as coffea users write them."""
    from coffea import processor
    from coffea.nanoevents.methods import candidate

    def lepton(c: Any, flavour: int = 0) -> ak.Array:
        """Electrons or muons as one candidate type (so they concatenate)."""
        fields = {k: c[k] for k in ("pt", "eta", "phi", "mass", "charge")}
        return ak.zip({**fields, "flavour": c.charge * 0 + flavour}, with_name="PtEtaPhiMCandidate",
                      behavior=candidate.behavior)  # fmt: skip

    class ADL(processor.ProcessorABC):  # type: ignore[misc]
        def __init__(self, q: int) -> None:
            self.q = q

        def process(self, events: Any) -> dict[str, Any]:
            h = new_hists(self.q)
            q = self.q
            if q == 1:
                h["q1_met"].fill(ak.to_numpy(events.MET.pt))
            elif q == 2:
                h["q2_jet_pt"].fill(ak.to_numpy(ak.flatten(events.Jet.pt)))
            elif q == 3:
                jets = events.Jet
                h["q3_jet_pt"].fill(ak.to_numpy(ak.flatten(jets.pt[abs(jets.eta) < 1])))
            elif q == 4:
                keep = ak.sum(events.Jet.pt > 40, axis=1) >= 2
                h["q4_met"].fill(ak.to_numpy(events.MET.pt[keep]))
            elif q == 5:
                ev = events[ak.num(events.Muon) >= 2]
                pairs = ak.combinations(ev.Muon, 2, fields=["a", "b"])
                mass = (pairs.a + pairs.b).mass
                good = (pairs.a.charge != pairs.b.charge) & (mass > 60) & (mass < 120)
                h["q5_met"].fill(ak.to_numpy(ev.MET.pt[ak.any(good, axis=1)]))
            elif q == 6:
                jets = events.Jet[ak.num(events.Jet) >= 3]
                tri = ak.combinations(jets, 3, fields=["a", "b", "c"])
                p4 = tri.a + tri.b + tri.c
                best = ak.argmin(abs(p4.mass - 172.5), axis=1, keepdims=True)
                h["q6_trijet_pt"].fill(ak.to_numpy(ak.flatten(p4[best].pt)))
                btag = np.maximum(np.maximum(tri.a.btagCSVV2, tri.b.btagCSVV2), tri.c.btagCSVV2)
                h["q6_trijet_btag"].fill(ak.to_numpy(ak.flatten(btag[best])))
            elif q == 7:
                jets = events.Jet[events.Jet.pt > 30]
                leptons = ak.concatenate(
                    [
                        lepton(events.Electron[events.Electron.pt > 10]),
                        lepton(events.Muon[events.Muon.pt > 10]),
                    ],
                    axis=1,
                )
                pairs = ak.cartesian([jets, leptons], nested=True)
                isolated = ak.all(pairs["0"].delta_r(pairs["1"]) >= 0.4, axis=2)
                h["q7_sum_pt"].fill(ak.to_numpy(ak.sum(jets.pt[isolated], axis=1)))
            elif q == 8:
                ev = events[ak.num(events.Electron) + ak.num(events.Muon) >= 3]
                leptons = ak.concatenate([lepton(ev.Electron, 0), lepton(ev.Muon, 1)], axis=1)
                pairs = ak.argcombinations(leptons, 2, fields=["a", "b"])
                a, b = leptons[pairs.a], leptons[pairs.b]
                sfos = (a.flavour == b.flavour) & (a.charge != b.charge)
                pairs, a, b = pairs[sfos], a[sfos], b[sfos]
                keep = ak.num(pairs) > 0
                ev, leptons, pairs, a, b = ev[keep], leptons[keep], pairs[keep], a[keep], b[keep]
                best = ak.argmin(abs((a + b).mass - 91.2), axis=1, keepdims=True)
                idx = ak.local_index(leptons)
                p1, p2 = ak.flatten(pairs.a[best]), ak.flatten(pairs.b[best])
                others = leptons[(idx != p1) & (idx != p2)]
                lead = ak.firsts(others[ak.argmax(others.pt, axis=1, keepdims=True)])
                mt = np.sqrt(2 * lead.pt * ev.MET.pt * (1 - np.cos(lead.delta_phi(ev.MET))))
                h["q8_mt"].fill(ak.to_numpy(mt))
            return {"events": len(events), "hists": h}

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator

    return ADL(query)


def coffea_runner(fmt: str, workers: int = 2, step: int = 100_000) -> Callable[[int, Path], Any]:
    """A function running one query on one file with coffea's futures
    executor on a warm pool of ``workers`` processes."""
    import sys

    import cloudpickle
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema
    from loky import ProcessPoolExecutor

    NanoAODSchema.warn_missing_crossrefs = False
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pool = ProcessPoolExecutor(max_workers=workers)

    def run(query: int, path: Path) -> tuple[int, dict[str, hist.Hist]]:
        runner = processor.Runner(
            executor=processor.FuturesExecutor(pool=pool, workers=workers, status=False),
            schema=NanoAODSchema,
            chunksize=step,
            format=fmt,
        )
        fileset = {"ttbar": {"files": {str(path): "Events"} if fmt == "root" else [str(path)]}}
        out = runner(fileset, processor_instance=coffea_processor(query), treename="Events")
        return int(out["events"]), out["hists"]

    return run
