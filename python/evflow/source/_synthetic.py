"""A synthetic generator of collider-like events, for tests and benchmarks."""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from .._runtime import BatchData

from ._common import Source, _check_step_size, _IterReader, _missing


class SyntheticSource(Source):
    """Generated events with a CMS NanoAOD-like schema, deterministic for a
    seed (batch ``i`` uses the random stream ``(seed, i)``, so the events do
    not depend on the thread count).

    Columns: ``run``, ``event``, ``nMuon``, ``Muon_pt``, ``Muon_eta``,
    ``Muon_phi``, ``Muon_mass``, ``Muon_charge``, ``Muon_pfRelIso04_all``,
    ``nJet``, ``Jet_pt``, ``Jet_eta``, ``Jet_phi``, ``Jet_mass``,
    ``Jet_btagCSVV2``, ``MET_pt``, ``MET_phi``, ``genWeight``. About half the
    events hold a Z→μμ-like muon pair.
    """

    COLUMNS = (
        "run",
        "event",
        "nMuon",
        "Muon_pt",
        "Muon_eta",
        "Muon_phi",
        "Muon_mass",
        "Muon_charge",
        "Muon_pfRelIso04_all",
        "nJet",
        "Jet_pt",
        "Jet_eta",
        "Jet_phi",
        "Jet_mass",
        "Jet_btagCSVV2",
        "MET_pt",
        "MET_phi",
        "genWeight",
    )

    def __init__(self, events: int, step_size: int = 100_000, seed: int = 1) -> None:
        if isinstance(events, bool) or not isinstance(events, numbers.Integral) or events < 0:
            raise ConfigurationError(f"events must be a whole number >= 0, not {events!r}")
        self.events = int(events)
        self.step_size = _check_step_size(step_size)
        self.max_events = None
        self.seed = int(seed)

    def check(self, columns: Sequence[str]) -> None:
        for c in columns:
            if c not in self.COLUMNS:
                raise _missing(c, self.COLUMNS, "the synthetic source")

    def total_events(self) -> int | None:
        return self.events

    def generate(self, index: int, start: int, n: int) -> dict[str, Any]:
        """Every column of batch ``index`` (events ``start`` to ``start+n``)."""
        import awkward as ak
        import numpy as np

        rng = np.random.default_rng([self.seed, index])

        def jagged(counts: np.ndarray, values: np.ndarray) -> ak.Array:
            return ak.unflatten(values, counts)

        n_mu = rng.poisson(1.2, n).astype(np.int32)
        z = rng.random(n) < 0.5
        n_mu[z] = np.maximum(n_mu[z], 2)
        m = int(n_mu.sum())
        mu_pt = rng.exponential(20.0, m).astype(np.float32) + 3.0
        mu_eta = rng.uniform(-2.4, 2.4, m).astype(np.float32)
        mu_phi = rng.uniform(-np.pi, np.pi, m).astype(np.float32)
        mu_q = np.where(rng.random(m) < 0.5, -1, 1).astype(np.int32)
        # Z-like pairs: the first two muons of a Z event share a 91 GeV mass.
        first = np.concatenate([[0], np.cumsum(n_mu)[:-1]])[z]
        # Same eta, back to back in phi, pT = m/2: the pair's mass is m.
        mass = rng.normal(91.19, 2.5, len(first))
        mu_eta[first + 1] = mu_eta[first]
        mu_phi[first + 1] = (mu_phi[first] + 2 * np.pi) % (2 * np.pi) - np.pi
        mu_pt[first] = mu_pt[first + 1] = (mass / 2).astype(np.float32)
        mu_q[first + 1] = -mu_q[first]
        n_j = rng.poisson(3.0, n).astype(np.int32)
        j = int(n_j.sum())
        cols: dict[str, Any] = {
            "run": ak.Array(np.ones(n, np.int32)),
            "event": ak.Array(np.arange(start + 1, start + n + 1, dtype=np.int64)),
            "nMuon": ak.Array(n_mu),
            "Muon_pt": jagged(n_mu, mu_pt),
            "Muon_eta": jagged(n_mu, mu_eta),
            "Muon_phi": jagged(n_mu, mu_phi),
            "Muon_mass": jagged(n_mu, np.full(m, 0.1057, np.float32)),
            "Muon_charge": jagged(n_mu, mu_q),
            "Muon_pfRelIso04_all": jagged(n_mu, rng.exponential(0.1, m).astype(np.float32)),
            "nJet": ak.Array(n_j),
            "Jet_pt": jagged(n_j, (rng.exponential(30.0, j) + 15.0).astype(np.float32)),
            "Jet_eta": jagged(n_j, rng.uniform(-4.7, 4.7, j).astype(np.float32)),
            "Jet_phi": jagged(n_j, rng.uniform(-np.pi, np.pi, j).astype(np.float32)),
            "Jet_mass": jagged(n_j, rng.exponential(8.0, j).astype(np.float32)),
            "Jet_btagCSVV2": jagged(n_j, rng.random(j).astype(np.float32)),
            "MET_pt": ak.Array(rng.exponential(30.0, n).astype(np.float32)),
            "MET_phi": ak.Array(rng.uniform(-np.pi, np.pi, n).astype(np.float32)),
            "genWeight": ak.Array(rng.normal(1.0, 0.1, n).astype(np.float32)),
        }
        return cols

    def _batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        from .._runtime import BatchData

        for index, start in enumerate(range(0, self.events, self.step_size)):
            n = min(self.step_size, self.events - start)
            cols = self.generate(index, start, n)
            keep = {c: cols[c] for c in columns}
            where = f"synthetic events {start}-{start + n - 1}"
            yield BatchData(
                keep,
                n,
                file="<synthetic>",
                entry_start=start,
                entry_stop=start + n,
                where=where,
                weight=weight,
            )

    def empty_batch(self, columns: Sequence[str], weight: str | None) -> BatchData | None:
        from .._runtime import BatchData

        cols = self.generate(0, 0, 0)
        return BatchData(
            {c: cols[c] for c in columns}, 0, file="<synthetic>", where="synthetic, no event", weight=weight
        )

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._batches(columns, weight))

    def describe(self) -> str:
        return f"synthetic source ({self.events} events, seed {self.seed})"


def synthetic(events: int, *, step_size: int = 100_000, seed: int = 1) -> SyntheticSource:
    """``events`` generated events (see :class:`SyntheticSource`)."""
    return SyntheticSource(events, step_size, seed)
