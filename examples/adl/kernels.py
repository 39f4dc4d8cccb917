"""Per-event numba kernels of the ADL queries 5 to 8 (see adl.py).

Compiled with ``nogil=True`` (other batches progress on evflow's threads
while a kernel runs) and cached on disk. adl.py loads this file under the
fixed module name ``evflow_adl_kernels``, so the numba cache works however
adl.py itself is loaded. Without numba, the functions stay plain Python (and
adl.py uses its awkward versions instead).

Every kernel takes the events' list boundaries (``starts``, ``stops``) and
flat per-object arrays; four-vectors come precomputed (``adl.p4``), so the
kernels only add, multiply, compare and take square roots, exactly as the
awkward versions do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

try:  # numba is optional: the awkward versions below give the same results.
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the environment
    numba = None
    HAVE_NUMBA = False


def _njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    if not HAVE_NUMBA:
        return fn
    return numba.njit(nogil=True, cache=True)(fn)


@_njit
def _mass(px: float, py: float, pz: float, e: float) -> float:
    return np.sqrt(max(e * e - px * px - py * py - pz * pz, 0.0))


@_njit
def q5_kernel(starts, stops, px, py, pz, e, charge, out):  # type: ignore[no-untyped-def]
    for i in range(len(starts)):
        a, b = starts[i], stops[i]
        found = False
        for j in range(a, b):
            for k in range(j + 1, b):
                if charge[j] != charge[k]:
                    m = _mass(px[j] + px[k], py[j] + py[k], pz[j] + pz[k], e[j] + e[k])
                    if m > 60.0 and m < 120.0:
                        found = True
                        break
            if found:
                break
        out[i] = found


@_njit
def q6_kernel(starts, stops, px, py, pz, e, btag, out_pt, out_btag):  # type: ignore[no-untyped-def]
    for i in range(len(starts)):
        a, b = starts[i], stops[i]
        best = np.inf
        best_pt = np.nan
        best_btag = np.nan
        for j in range(a, b):
            for k in range(j + 1, b):
                sx = px[j] + px[k]
                sy = py[j] + py[k]
                sz = pz[j] + pz[k]
                se = e[j] + e[k]
                for m in range(k + 1, b):
                    tx = sx + px[m]
                    ty = sy + py[m]
                    d = abs(_mass(tx, ty, sz + pz[m], se + e[m]) - 172.5)
                    if d < best:
                        best = d
                        best_pt = np.sqrt(tx * tx + ty * ty)
                        best_btag = max(max(np.float64(btag[j]), np.float64(btag[k])), np.float64(btag[m]))
        out_pt[i] = best_pt
        out_btag[i] = best_btag


@_njit
def _isolated(eta: float, phi: float, starts, stops, lpt, leta, lphi, i) -> bool:  # type: ignore[no-untyped-def]
    for m in range(starts[i], stops[i]):
        if lpt[m] > 10.0:
            de = eta - np.float64(leta[m])
            dp = phi - np.float64(lphi[m])
            if dp > np.pi:
                dp -= 2 * np.pi
            elif dp < -np.pi:
                dp += 2 * np.pi
            if np.sqrt(de * de + dp * dp) < 0.4:
                return False
    return True


@_njit
def q7_kernel(js, je, jpt, jeta, jphi, es, ee, ept, eeta, ephi, ms, me, mpt, meta, mphi, out):  # type: ignore[no-untyped-def]
    for i in range(len(js)):
        total = 0.0
        for j in range(js[i], je[i]):
            if jpt[j] > 30.0:
                eta = np.float64(jeta[j])
                phi = np.float64(jphi[j])
                if _isolated(eta, phi, es, ee, ept, eeta, ephi, i) and _isolated(
                    eta, phi, ms, me, mpt, meta, mphi, i
                ):
                    total += np.float64(jpt[j])
        out[i] = total


@_njit
def q8_kernel(es, ee, ms, me, px, py, pz, e, pt, phi, charge, met, met_phi, has_pair, mt):  # type: ignore[no-untyped-def]
    # px ... charge: electrons then muons, one flat array each (muons from offset len(electrons)).
    n_el = 0 if len(ee) == 0 else ee[len(ee) - 1]
    for i in range(len(es)):
        ne = ee[i] - es[i]
        n = ne + me[i] - ms[i]
        best = np.inf
        p1 = -1
        p2 = -1
        for a in range(n):
            ia = es[i] + a if a < ne else n_el + ms[i] + a - ne
            for b in range(a + 1, n):
                ib = es[i] + b if b < ne else n_el + ms[i] + b - ne
                if (a < ne) != (b < ne) or charge[ia] == charge[ib]:
                    continue
                d = abs(_mass(px[ia] + px[ib], py[ia] + py[ib], pz[ia] + pz[ib], e[ia] + e[ib]) - 91.2)
                if d < best:
                    best = d
                    p1 = a
                    p2 = b
        lead = -1
        lead_pt = -np.inf
        for a in range(n):
            if p1 >= 0 and a != p1 and a != p2:
                ia = es[i] + a if a < ne else n_el + ms[i] + a - ne
                if pt[ia] > lead_pt:
                    lead_pt = pt[ia]
                    lead = ia
        has_pair[i] = lead >= 0
        if lead < 0:
            mt[i] = np.nan
        else:
            mt[i] = np.sqrt(
                2.0 * lead_pt * np.float64(met[i]) * (1.0 - np.cos(phi[lead] - np.float64(met_phi[i])))
            )
