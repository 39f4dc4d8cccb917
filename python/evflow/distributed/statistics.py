"""What the adaptive planners of the finished chunks measured, merged in
chunk order for the chunks dispatched next (see docs/distributed.md,
"Adaptive ordering across chunks").

Chunks finish in any order; their statistics are merged as if they had
finished in chunk order (the samples of later chunks counting as the more
recent, the ``after=`` pairs their probes inferred kept in the order of
the chunks), so that the same finished chunks give the same merged
statistics whatever the order they finished in.
"""

from __future__ import annotations


def merge(parts: list[str | None]) -> str | None:
    """``parts`` (JSON texts of ``PathStatistics`` per path, ``None`` or
    ``"{}"``: nothing measured) merged in the order given."""
    texts = [p for p in parts if p and p != "{}"]
    if len(texts) < 2:
        return texts[0] if texts else None
    from .. import _evflow

    return str(_evflow.merge_ordering_stats(texts))


class ChunkStatistics:
    """The statistics of the finished chunks, merged in chunk order.

    >>> one = '{"sel": {"steps": ["a"], "samples": [], "stops": [], "costs": [null]}}'
    >>> s = ChunkStatistics()
    >>> s.add(1, one)  # chunk 1 finished first
    >>> s.add(0, None)  # chunk 0 measured nothing
    >>> s.merged == one
    True
    """

    def __init__(self) -> None:
        #: Chunks ``0 .. next - 1``, merged (every one of them finished).
        self._prefix: str | None = None
        self._next = 0
        #: Finished chunks after a gap (one still running), by index.
        self._pending: dict[int, str | None] = {}

    def add(self, index: int, stats: str | None) -> None:
        """Chunk ``index`` finished with ``stats`` (``None``: none, as a
        chunk that failed and was skipped)."""
        if index < self._next:
            return  # merged already (a chunk counts once)
        self._pending[index] = stats
        while self._next in self._pending:
            self._prefix = merge([self._prefix, self._pending.pop(self._next)])
            self._next += 1

    @property
    def merged(self) -> str | None:
        """What the finished chunks measured, merged in chunk order."""
        return merge([self._prefix, *(self._pending[k] for k in sorted(self._pending))])
