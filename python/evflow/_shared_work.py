"""What a producer computes, as a structural key: two producers with the
same key compute the same values, so a process that merges several
analyses (one pass for many queries) computes them once.

The key of a function is its code object (the same ``def``, or code equal to
it), its defaults, the module it reads globals from, and the values its
closure captured: hashable values by value (with their type), functions by
their own key, anything else by identity (a captured list or array is the
same work only when it is the same object). A producer's key adds what it
reads and how it runs; its product names are left out, so that the products
of a duplicate can be served by the first one's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from ._modules import Module, Producer
from .errors import ConfigurationError

#: Nesting of captured functions followed (deeper ones count by identity).
_MAX_DEPTH = 8


def function_key(fn: Callable[..., Any], depth: int = 0) -> Hashable:
    """The structural key of ``fn`` (identity for what is not a plain Python
    function: builtins, callable objects, methods)."""
    code = getattr(fn, "__code__", None)
    if code is None or depth > _MAX_DEPTH or not callable(fn) or hasattr(fn, "__self__"):
        return ("id", id(fn))
    cells = tuple(_value_key(c.cell_contents, depth) for c in (fn.__closure__ or ()))
    defaults = tuple(_value_key(v, depth) for v in (fn.__defaults__ or ()))
    kwdefaults = tuple(sorted((k, _value_key(v, depth)) for k, v in (fn.__kwdefaults__ or {}).items()))
    return ("fn", code, id(fn.__globals__), cells, defaults, kwdefaults)


def _value_key(v: Any, depth: int) -> Hashable:
    if callable(v) and hasattr(v, "__code__"):
        return function_key(v, depth + 1)
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    if type(v).__hash__ is object.__hash__:
        return ("id", id(v))
    return ("value", type(v), v)


def producer_key(p: Producer) -> Hashable | None:
    """The key of what ``p`` computes (``None``: never shared: it runs on a
    Dask worker, which may hold state of its own)."""
    if p.remote is not None:
        return None
    device = None if p.device is None else function_key(p.device)
    return (
        function_key(p.fn),
        tuple(p.consumes),
        len(p.produces),
        p.concurrency,
        tuple(p.resources),
        device,
        p.device_required,
    )


def share_products(
    modules: Iterable[Module],
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """For the producers among ``modules``: product name -> label of the
    producer that computes it, product name -> that producer's name for it,
    and label of each duplicate producer (same key as an earlier one, which
    computes for it: it runs no module of its own) -> the earlier one's."""
    product_of: dict[str, str] = {}
    product_name: dict[str, str] = {}
    shared_with: dict[str, str] = {}
    first_of: dict[Hashable, Producer] = {}
    for m in modules:
        if not isinstance(m, Producer):
            continue
        key = producer_key(m)
        first = first_of.setdefault(key, m) if key is not None else m
        if first is not m:
            shared_with[m.label] = first.label
        for i, p in enumerate(m.produces):
            if p in product_of:
                raise ConfigurationError(
                    f"product '{p}' is produced by both '{product_of[p]}' and '{m.label}'"
                )
            product_of[p] = first.label
            product_name[p] = first.produces[i]
    return product_of, product_name, shared_with
