"""The cut-flow's cumulative counts: per row of the table, the events that
passed every filter of the rows up to it, in the order shown.

The engine counts, per batch, what each filter saw and passed on the events
its path still held; a filter that read the path after ``j`` narrowings,
all made by the ``j`` steps recorded before it, passed exactly the events
passing those steps and itself. So every batch knows the events passing
some sets of filters: the prefixes of the order it ran, the whole set it
ran (the events its path accepted), and none (the batch). A set of filters
the order shown names is exact on a batch that knows it, or that knows a
subset of it no event passed; on another batch (it ran the filters in
another order, or some at once) it is bounded by what it counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Per batch: the events passing each set of filters it knows (bit ``i``:
#: written filter ``i``).
Known = dict[int, int]


def known_sets(steps: Iterable[tuple[int, int, int]], events: int, accepted: int | None) -> Known:
    """What one batch knows, from its records on the path as ``(position,
    step, passed)``, its ``events`` and the events its path ``accepted``
    (``None``: unknown)."""
    steps = list(steps)
    known: Known = {0: events}
    everything = 0
    for position, step, passed in steps:
        everything |= 1 << step
        before = [s for p, s, _ in steps if p < position]
        # Read after `position` narrowings, made by the steps recorded before it.
        if len(before) == position:
            known[sum(1 << s for s in before) | 1 << step] = passed
    if accepted is not None and steps:
        known[everything] = accepted
    return known


def _bound(known: Known, rows: int) -> int:
    """The fewest events that may pass the filters ``rows`` on a batch that
    did not count them: at most those passing a subset it counted, and at
    most those passing ``rows`` and a set ``A`` it counted both of, plus
    those ``A`` rejected."""
    events = known[0]
    bound = min(n for s, n in known.items() if s & ~rows == 0)
    for a, n_a in known.items():
        both = known.get(a | rows)
        if both is not None:
            bound = min(bound, both + events - n_a)
    return bound


def cumulative(batches: Sequence[Known], order: Sequence[int]) -> list[tuple[int, bool]]:
    """Per row of ``order`` (written indices of the filters in the order
    shown): the events passing it and every row before it, summed over
    ``batches``, and whether that count is exact (otherwise it is an upper
    bound, never above the row before)."""
    out = []
    rows = 0
    # Per batch, its count of the row before: what passes a row passes those before.
    before = [known[0] for known in batches]
    for step in order:
        rows |= 1 << step
        total, exact = 0, True
        for b, known in enumerate(batches):
            if rows in known:
                before[b] = known[rows]
            else:
                before[b] = min(before[b], _bound(known, rows))
                exact = exact and before[b] == 0
            total += before[b]
        out.append((total, exact))
    return out
