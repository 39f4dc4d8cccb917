"""The cut-flow: per path and filter, the events that reached the filter and
those it let through (and their sums of weights when the process names a
weight column).

Counts are *events*, summed over batches. On a reorderable path the engine
may run the filters in another order than written; each filter's line then
counts the events that actually reached it, and ``order`` gives the
execution order most batches used.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ._cumulative import cumulative, known_sets


@dataclass(frozen=True)
class CutFlowStep:
    """One filter of a path."""

    filter: str
    seen: int
    passed: int
    weighted_seen: float
    weighted_passed: float
    #: the events passing this filter and every filter before it in the
    #: order shown (:meth:`PathCutFlow.shown`) over the events entering the
    #: path; when not ``cumulative_exact`` (batches ran these filters in
    #: another order), an upper bound from the batches' counts
    cumulative: float
    #: whether ``cumulative`` is the exact fraction
    cumulative_exact: bool = True

    @property
    def efficiency(self) -> float:
        """passed / seen (1.0 when no event reached the filter)."""
        return self.passed / self.seen if self.seen else 1.0

    @property
    def weighted_efficiency(self) -> float:
        return self.weighted_passed / self.weighted_seen if self.weighted_seen else 1.0


@dataclass(frozen=True)
class PathCutFlow:
    """The cut-flow of one path."""

    path: str
    events: int
    passed: int
    weighted_events: float
    weighted_passed: float
    steps: list[CutFlowStep]
    reorderable: bool = False
    #: execution order used by most batches (filter names)
    order: list[str] = field(default_factory=list)
    #: the ordering policy that ran the path: ``"adaptive"`` (the default),
    #: ``"fixed"`` or ``"hepframe"``; ``"written"`` for a path that is not
    #: reorderable
    policy: str = "written"
    #: why the path ran in ``order``: the engine's reason for its last change
    #: of order (method, samples, expected cost and gain), or why the written
    #: order was kept
    why: str = ""

    @property
    def efficiency(self) -> float:
        return self.passed / self.events if self.events else 1.0

    def __getitem__(self, name: str) -> CutFlowStep:
        for s in self.steps:
            if s.filter == name:
                return s
        raise KeyError(f"path '{self.path}' has no filter '{name}'")

    def __iter__(self) -> Iterator[CutFlowStep]:
        """The steps, in written order (as iterating a :class:`CutFlow`
        gives its paths)."""
        return iter(self.steps)

    def __contains__(self, name: object) -> bool:
        """``"met_cut" in cutflow["sr"]``: whether the path has a filter of that name."""
        return any(s.filter == name for s in self.steps)

    def keys(self) -> list[str]:
        """The filter names, in written order."""
        return [s.filter for s in self.steps]

    def items(self) -> list[tuple[str, CutFlowStep]]:
        return [(s.filter, s) for s in self.steps]

    def __len__(self) -> int:
        return len(self.steps)

    def shown(self) -> list[CutFlowStep]:
        """The filters in the order they ran (``order``; the written order
        for a path that is not reorderable): the order of the table's rows,
        along which ``cumulative`` falls."""
        if self.reorderable and sorted(self.order) == sorted(s.filter for s in self.steps):
            return [self[f] for f in self.order]
        return list(self.steps)


class CutFlow:
    """Cut-flows of every path: ``cutflow["selection"]["opposite_charge"].passed``.

    ``print(cutflow)`` shows a table; :meth:`to_dict` gives plain data.
    """

    def __init__(self, paths: list[PathCutFlow], weighted: bool) -> None:
        self.paths = {p.path: p for p in paths}
        self.weighted = weighted

    def __getitem__(self, path: str) -> PathCutFlow:
        try:
            return self.paths[path]
        except KeyError:
            raise KeyError(f"no path '{path}' (paths: {', '.join(self.paths)})") from None

    def __iter__(self) -> Iterator[PathCutFlow]:
        return iter(self.paths.values())

    def __contains__(self, path: object) -> bool:
        """``"sr" in result.cutflow``: whether there is a path of that name."""
        return path in self.paths

    def keys(self) -> list[str]:
        """The path names, in the process's order."""
        return list(self.paths)

    def items(self) -> list[tuple[str, PathCutFlow]]:
        return list(self.paths.items())

    def __len__(self) -> int:
        return len(self.paths)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, by path: counts, weighted sums (``weighted``: whether
        the run was weighted), order and filters."""
        return {
            name: {
                "events": p.events,
                "passed": p.passed,
                "weighted_events": p.weighted_events,
                "weighted_passed": p.weighted_passed,
                # Said explicitly: weights may sum to the event count.
                "weighted": self.weighted,
                "reorderable": p.reorderable,
                "order": p.order,
                "policy": p.policy,
                "why": p.why,
                "filters": [
                    {
                        "filter": s.filter,
                        "seen": s.seen,
                        "passed": s.passed,
                        "efficiency": s.efficiency,
                        "cumulative": s.cumulative,
                        "cumulative_exact": s.cumulative_exact,
                        "weighted_seen": s.weighted_seen,
                        "weighted_passed": s.weighted_passed,
                    }
                    for s in p.steps
                ],
            }
            for name, p in self.paths.items()
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CutFlow:
        """The cut-flow :meth:`to_dict` gave (``Result.load``)."""
        paths = [
            PathCutFlow(
                path=name,
                events=int(p["events"]),
                passed=int(p["passed"]),
                weighted_events=float(p["weighted_events"]),
                weighted_passed=float(p["weighted_passed"]),
                steps=[
                    CutFlowStep(
                        filter=f["filter"],
                        seen=int(f["seen"]),
                        passed=int(f["passed"]),
                        weighted_seen=float(f["weighted_seen"]),
                        weighted_passed=float(f["weighted_passed"]),
                        cumulative=float(f["cumulative"]),
                        # Saved before the flag was: exact where every batch
                        # ran one order.
                        cumulative_exact=bool(
                            f.get(
                                "cumulative_exact",
                                not p.get("reorderable", False) or p.get("policy") == "fixed",
                            )
                        ),
                    )
                    for f in p["filters"]
                ],
                reorderable=bool(p.get("reorderable", False)),
                order=list(p.get("order", [])),
                policy=str(p.get("policy", "written")),
                why=str(p.get("why", "")),
            )
            for name, p in data.items()
        ]
        said = [bool(p["weighted"]) for p in data.values() if "weighted" in p]
        # Saved before the flag was: weighted where the sums differ from the
        # counts (a weighted run whose weights sum to the counts reads as
        # unweighted).
        weighted = any(said) if said else any(p.weighted_events != p.events for p in paths)
        return cls(paths, weighted)

    def table(self) -> str:
        """The cut-flow as a text table."""
        lines: list[str] = []
        for p in self.paths.values():
            head = f"path '{p.path}'"
            if p.reorderable:
                head += f" (reorderable, {p.policy} order: " + " > ".join(p.order) + ")"
            lines.append(head)
            width = max([len("filter"), len("all events")] + [len(s.filter) for s in p.steps])
            cols = f"{'filter':<{width}}  {'seen':>12}  {'passed':>12}  {'eff.':>8}  {'cumul.':>8}"
            if self.weighted:
                cols += f"  {'w. seen':>14}  {'w. passed':>14}  {'w. eff.':>8}"
            lines.append(cols)
            lines.append("-" * len(cols))
            first = f"{'all events':<{width}}  {p.events:>12}  {p.events:>12}  {'':>8}  {1:>8.2%}"
            if self.weighted:
                first += f"  {p.weighted_events:>14.6g}  {p.weighted_events:>14.6g}  {'':>8}"
            lines.append(first)
            for s in p.shown():
                row = (
                    f"{s.filter:<{width}}  {s.seen:>12}  {s.passed:>12}  {_percent(s.efficiency, s.seen):>8}  "
                    f"{_cumulative_shown(s, p.events):>8}"
                )
                if self.weighted:
                    row += (
                        f"  {s.weighted_seen:>14.6g}  {s.weighted_passed:>14.6g}  "
                        f"{_percent(s.weighted_efficiency, s.weighted_seen):>8}"
                    )
                lines.append(row)
            lines.append(
                f"{'accepted':<{width}}  {'':>12}  {p.passed:>12}  {'':>8}  {_percent(p.efficiency, p.events):>8}"
            )
            if not all(s.cumulative_exact for s in p.steps):
                lines.append(_NOT_EXACT)
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        rows = []
        for p in self.paths.values():
            rows.append(f"<tr><th colspan=5 style='text-align:left'>path '{p.path}'</th></tr>")
            rows.append("<tr><th>filter</th><th>seen</th><th>passed</th><th>eff.</th><th>cumul.</th></tr>")
            rows.append(
                f"<tr><td>all events</td><td>{p.events}</td><td>{p.events}</td><td></td><td>100%</td></tr>"
            )
            for s in p.shown():
                rows.append(
                    f"<tr><td>{s.filter}</td><td>{s.seen}</td><td>{s.passed}</td>"
                    f"<td>{_percent(s.efficiency, s.seen)}</td><td>{_cumulative_shown(s, p.events)}</td></tr>"
                )
            if not all(s.cumulative_exact for s in p.steps):
                rows.append(f"<tr><td colspan=5>{_NOT_EXACT}</td></tr>")
        return "<table>" + "".join(rows) + "</table>"


#: The table's note under a path with a cumulative fraction that is not exact.
_NOT_EXACT = (
    "~ not exact: some batches ran the filters in another order and did not count "
    "the events passing exactly these rows"
)


def _cumulative_shown(step: CutFlowStep, events: int) -> str:
    """The cumulative fraction as shown, ``~`` before one that is not exact."""
    shown = _percent(step.cumulative, events)
    return shown if step.cumulative_exact or not events else f"~{shown}"


def _percent(efficiency: float, seen: float) -> str:
    """An efficiency as shown: ``"–"`` where nothing reached the filter (0/0;
    the numeric value stays 1.0)."""
    return f"{efficiency:.2%}" if seen else "–"


def build(
    paths: Sequence[tuple[str, Sequence[str], bool]],
    records: Sequence[tuple[int, int, int, int, int, int, float, float]],
    batches: Sequence[tuple[int, int, float]],
    finals: Sequence[tuple[int, Sequence[tuple[int, float]]]],
    failed: Sequence[int],
    weighted: bool,
    policy: str = "adaptive",
    orderings: Sequence[dict[str, Any]] = (),
) -> CutFlow:
    """Sums the engine's per-batch records in batch order (deterministic).
    ``policy`` is the ordering policy of the reorderable paths and
    ``orderings`` the engine report's list of order changes (which say why)."""
    bad = set(failed)
    good = [b for b in batches if b[0] not in bad]
    events = sum(b[1] for b in good)
    w_events = sum(b[2] for b in good)
    finals = [f for f in finals if f[0] not in bad]
    out: list[PathCutFlow] = []
    for p, (name, filters, reorderable) in enumerate(paths):
        seen = [0] * len(filters)
        passed = [0] * len(filters)
        w_seen = [0.0] * len(filters)
        w_passed = [0.0] * len(filters)
        executed: dict[int, list[tuple[int, int, int]]] = {}
        for batch, path, step, position, s, ps, ws, wp in records:
            if path != p or batch in bad:
                continue
            seen[step] += s
            passed[step] += ps
            w_seen[step] += ws
            w_passed[step] += wp
            executed.setdefault(batch, []).append((position, step, ps))
        n_pass = sum(f[1][p][0] for f in finals)
        w_pass = sum(f[1][p][1] for f in finals)
        runs = {batch: [step for _, step, _ in sorted(steps)] for batch, steps in executed.items()}
        best = representative_order(list(runs.values()), len(filters))
        accepted = {f[0]: f[1][p][0] for f in finals}
        known = [known_sets(executed.get(b[0], ()), b[1], accepted.get(b[0])) for b in good]
        # The rows of the table (PathCutFlow.shown): the order that ran, or as written.
        rows = best if reorderable else list(range(len(filters)))
        fractions = {
            i: (n / events if events else 1.0, exact or not events)
            for i, (n, exact) in zip(rows, cumulative(known, rows), strict=True)
        }
        reach = max((len(r) for r in runs.values()), default=0)
        # The batches that ran the representative order (as far as they went).
        ran_by = [b for b, r in runs.items() if r == best[: len(r)]]
        steps = [
            CutFlowStep(
                filter=f,
                seen=seen[i],
                passed=passed[i],
                weighted_seen=w_seen[i],
                weighted_passed=w_passed[i],
                cumulative=fractions[i][0],
                cumulative_exact=fractions[i][1],
            )
            for i, f in enumerate(filters)
        ]
        out.append(
            PathCutFlow(
                path=name,
                events=events,
                passed=n_pass,
                weighted_events=w_events,
                weighted_passed=w_pass,
                steps=steps,
                reorderable=reorderable,
                order=[filters[i] for i in best],
                policy=policy if reorderable else "written",
                why=_why(
                    name,
                    reorderable,
                    policy,
                    orderings,
                    [filters[i] for i in best][:reach],
                    list(filters),
                    ran_by,
                    len(runs),
                ),
            )
        )
    return CutFlow(out, weighted)


def representative_order(runs: Sequence[Sequence[int]], n: int) -> list[int]:
    """The order most batches ran a path's ``n`` filters in, from each
    batch's steps in execution order (``runs``; a batch rejected early ran a
    prefix): the order some batch ran that the most batches agree with (a
    batch agrees when one of the two runs is a prefix of the other; ties:
    the longer, then the one with filters written first), continued position
    by position by the step most of the longer runs that agree so far ran
    next; steps no batch reached follow in written order. Never a filter
    that did not run before one that did. (Counting whole runs, not each
    position apart: batches that agree on a first step but split after it
    must not outvote one order more batches ran.)"""
    exact = Counter(tuple(r) for r in runs)
    # below[p]: the runs that start with p (p itself included)
    below: Counter[tuple[int, ...]] = Counter()
    for r, m in exact.items():
        for k in range(1, len(r) + 1):
            below[r[:k]] += m
    # Agreeing with c: the runs that start with c, and the shorter runs c starts with.
    score = {c: below[c] + sum(exact[c[:k]] for k in range(1, len(c))) for c in exact if c}
    order: list[int] = list(min(score, key=lambda c: (-score[c], -len(c), c))) if score else []
    alive = [list(r) for r in runs if tuple(r[: len(order)]) == tuple(order)]
    while len(order) < n:
        k = len(order)
        nxt = Counter(r[k] for r in alive if len(r) > k)
        if not nxt:
            break
        step = min(nxt, key=lambda s: (-nxt[s], s))
        order.append(step)
        alive = [r for r in alive if len(r) > k and r[k] == step]
    return order + [i for i in range(n) if i not in order]


def _why(
    path: str,
    reorderable: bool,
    policy: str,
    orderings: Sequence[dict[str, Any]],
    ran: Sequence[str] = (),
    written: Sequence[str] = (),
    ran_by: Sequence[int] = (),
    batches: int = 0,
) -> str:
    """Why `path` ran in the order it did (``ran``: the representative order
    as far as batches reached it; ``written``: the path's filters as
    written; ``ran_by``: the batches that ran ``ran``, of ``batches`` that
    ran the path), from the engine's
    order changes: the last change to that order, not a later one that fewer
    batches ran (or none: a decision after the last batch). A change of a
    distributed run names its chunk, whose batches it counts. Never says the
    written order was kept when the order that ran is another."""
    if not reorderable:
        return "not reorderable: the written order"
    if policy == "fixed":
        if ran and ran != list(written)[: len(ran)]:
            return f"filter_order='fixed': the written order repaired for its constraints ({' > '.join(ran)})"
        return "filter_order='fixed': the written order"
    changes = [
        c
        for c in orderings
        if c.get("path") == path and not str(c.get("reason", "")).startswith("in use at the end")
    ]
    ran = list(ran)

    def names(change: dict[str, Any]) -> list[str]:
        # Reports before module labels were used name a filter on several
        # paths "label@path".
        return [str(m).removesuffix(f"@{path}") for m in change.get("order", [])]

    def when(change: dict[str, Any]) -> str:
        # A distributed run's changes count the batches of their chunk.
        chunk = f" of chunk {change['chunk']}" if "chunk" in change else ""
        n = change["at_event"]
        if n == 0:  # decided on the first batch's probe, before any batch finished
            return f"before any batch finished{chunk}"
        return f"after {n} {'batch' if n == 1 else 'batches'}{chunk}"

    to_ran = [c for c in changes if names(c)[: len(ran)] == ran]
    later = ""
    if ran and changes and (not to_ran or to_ran[-1] is not changes[-1]):
        last = changes[-1]
        later = f" (a later change {when(last)}, to {' > '.join(names(last))}, ran on fewer batches)"
    if ran and not to_ran and written and ran != list(written)[: len(ran)]:
        # No change names the order that ran, and it is not the written one.
        return _other_order(policy, changes, ran, ran_by, when, names, later)
    if ran and changes and not to_ran:
        changes = []
    elif later:
        changes = to_ran
    # Kept on part of the job only: say on how much.
    kept = (
        f"kept on {len(ran_by)} of {batches} batches, more than any other order"
        if later and len(ran_by) < batches
        else "kept"
    )
    if not changes and policy == "hepframe":
        return (
            f"hepframe: the written order was {kept} (HEP-Frame's heuristic changes the order at "
            "its checkpoints, the first after a warm-up of 4 batches (more when they hold fewer than "
            f"64 events), when its weights say so){later}"
        )
    if not changes:
        return (
            f"{policy}: the written order was {kept} (no other order was expected to save "
            f"more than its uncertainty plus the switching cost){later}"
        )
    last = changes[-1]
    return f"{policy}: chosen {when(last)}: {last['reason']}{later}"


def _other_order(
    policy: str,
    changes: Sequence[dict[str, Any]],
    ran: Sequence[str],
    ran_by: Sequence[int],
    when: Callable[[dict[str, Any]], str],
    names: Callable[[dict[str, Any]], list[str]],
    later: str,
) -> str:
    """Why a path ran ``ran``, an order that is neither written nor named by
    any change: the change in effect when most of its batches (``ran_by``)
    started (a decision applies to the batches started after it), or, before
    any change, the written order repaired for the path's constraints."""
    shown = " > ".join(ran)
    # HEP-Frame requests a level's steps together: the batches record them
    # in the order they finished, not the order of the change.
    together = (
        "; HEP-Frame runs the steps of a level together, recorded in the order they finished"
        if policy == "hepframe"
        else ""
    )
    # Chunks count their own batches: batch numbers cannot place their changes.
    local = [c for c in changes if "chunk" not in c]
    # The change in effect for batch b: the last made after at most b batches.
    made = sorted((int(c.get("at_event", 0)), k) for k, c in enumerate(local))
    at = [a for a, _ in made]
    last = list(accumulate((k for _, k in made), max))
    votes = Counter(last[i - 1] if (i := bisect_right(at, b)) else -1 for b in ran_by)
    if changes and (len(local) < len(changes) or not votes):
        producer: dict[str, Any] | None = changes[-1]
    else:
        k = min(votes, key=lambda k: (-votes[k], -k)) if votes else -1
        producer = local[k] if k >= 0 else None
    if producer is None:
        return (
            f"{policy}: ran {shown}, the order it started with: the written order repaired "
            f"for the path's constraints (after=...), before any change of order{later}"
        )
    if producer is changes[-1]:
        later = ""
    return (
        f"{policy}: ran {shown} from the order chosen {when(producer)} "
        f"({' > '.join(names(producer))}): {producer['reason']}{together}{later}"
    )
