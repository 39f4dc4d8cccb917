"""Histogram filling: the values a histogram's columns or ``fill=``
function give for a batch's events, as flat numpy arrays (one entry per
object) with their weights."""

from __future__ import annotations

from typing import Any

import awkward as ak
import numpy as np

from .errors import ModuleOutputError


def _optional(t: Any) -> bool:
    """Whether the awkward type ``t`` may hold missing values (None) at
    some level of its lists."""
    if isinstance(t, ak.types.ArrayType):
        t = t.content
    while True:
        if isinstance(t, ak.types.OptionType):
            return True
        if not isinstance(t, ak.types.ListType | ak.types.RegularType):
            return False
        t = t.content


def _drop_missing(arrays: list[Any]) -> list[Any]:
    """Arrays of one structure without the entries where any of them is
    missing (None), level by level: an event whose list is missing, then
    the objects missing in a list, fill nothing."""
    for axis in range(arrays[0].ndim):
        keep = None
        for a in arrays:
            present = ~ak.is_none(a, axis=axis)
            keep = present if keep is None else keep & present
        arrays = [a[keep] for a in arrays]
    return arrays


def flatten(values: list[Any], weight: Any) -> tuple[list[Any], Any]:
    """Broadcasts jagged columns (and per-event weights) to one entry per
    object and flattens them to numpy. Entries where a value or the weight
    is missing (None: ``ak.firsts`` of an empty list, say) are left out.
    A value that is not an array (a scalar, a list) is refused."""
    for i, v in enumerate(values):
        _check_array(v, i if len(values) > 1 else None)
    # A numpy array of several dimensions holds one fixed-size list per event.
    values = [ak.from_numpy(v) if isinstance(v, np.ndarray) and v.ndim > 1 else v for v in values]
    jagged = any(isinstance(v, ak.Array) and v.ndim > 1 for v in values)
    optional = any(isinstance(v, ak.Array) and _optional(v.type) for v in [*values, weight])
    if jagged or optional:
        arrays = [*values, weight] if weight is not None else list(values)
        # Fixed-size lists as variable ones: per-event values broadcast to
        # their entries (fixed sizes would broadcast like numpy's, from the right).
        arrays = [ak.from_regular(a, axis=None) if isinstance(a, ak.Array) else a for a in arrays]
        arrays = ak.broadcast_arrays(*arrays)
        if optional:
            arrays = _drop_missing(arrays)
        out = [ak.to_numpy(ak.flatten(a, axis=None), allow_missing=False) for a in arrays]
        if weight is not None:
            return out[:-1], out[-1]
        return out, None
    out = [ak.to_numpy(v) if isinstance(v, ak.Array) else np.asarray(v) for v in values]
    return out, (
        None
        if weight is None
        else np.asarray(ak.to_numpy(weight) if isinstance(weight, ak.Array) else weight)
    )


def check_weights(
    values: list[Any], weight: Any, flat_weights: Any, histogram: str, column: str, first_entry: int, sel: Any
) -> None:
    """Refuses weights that are not finite numbers among those a fill
    uses (``flat_weights``, as :func:`flatten` gave them for ``values``
    and ``weight``), naming the input entry of the first (the batch's
    events start at ``first_entry``; ``sel``: those filled, ``None``:
    all). One NaN (or infinite) weight makes its bin's sum
    and variance NaN in the merged histogram, silently (boost-histogram
    fills it as any number), and no bin tells which events it came from."""
    if flat_weights is None or flat_weights.dtype.kind not in "fc":
        return
    bad = ~np.isfinite(flat_weights)
    if not bad.any():
        return
    # The event of each filled entry, broadcast as the values are.
    event = int(flatten([*values, np.arange(len(weight))], weight)[0][-1][np.argmax(bad)])
    first = first_entry + (event if sel is None else int(sel[event]))
    raise ModuleOutputError(
        f"histogram '{histogram}': its weight '{column}' is not a finite number for "
        f"{int(bad.sum())} of the {len(flat_weights)} values it fills (first: {flat_weights[bad][0]}, "
        f"input entry {first}); a NaN or infinite weight makes its bin's sum NaN or infinite: "
        "select the events, or replace the weights (np.nan_to_num), first"
    )


def _check_array(value: Any, axis: int | None) -> None:
    """Refuses a value that is not an array of entries: a scalar (a 0-d
    array, ``ev.x.mean()``) would fill one entry per batch, and a list or
    tuple of numbers entries that no event gave, so that the histogram
    would depend on the batches' size."""
    # An array of any library (numpy, awkward, pandas) has dimensions.
    if isinstance(getattr(value, "ndim", None), int) and value.ndim > 0:
        return
    scalar = getattr(value, "ndim", None) == 0 or isinstance(value, int | float | complex)
    what = "a scalar (0-d)" if scalar else f"a {type(value).__name__}, not an array"
    where = "" if axis is None else f" for axis {axis}"
    raise TypeError(
        f"fill= returned {what}{where}; return a numpy or awkward array with one entry per event "
        "(or per object), or a tuple or dict of them (one per axis)"
    )


def fill_values(got: Any, h: Any) -> list[Any]:
    """What a histogram's ``fill=`` function returned, one value per axis:
    a tuple (in axis order), a dict by axis name (``hist``'s named axes), or
    one value."""
    if isinstance(got, dict):
        names = [str(n) for n in h.axes.name]
        if sorted(got) != sorted(names):
            raise ValueError(f"fill= returned the keys {sorted(got)}, but the axes are named {names}")
        return [got[n] for n in names]
    return list(got) if isinstance(got, tuple) else [got]


def describe(v: Any) -> str:
    """A value's kind and shape, for messages (not its contents)."""
    if isinstance(v, ak.Array):
        t = str(v.type)
        return f"awkward {t[:60] + '...' if len(t) > 60 else t}"
    if isinstance(v, np.ndarray):
        return f"numpy {v.dtype} of shape {v.shape}"
    return type(v).__name__


def add_into(total: Any, part: Any) -> Any:
    """``total += part`` for two histograms, keeping their variances known
    when both had them: boost-histogram forgets them after any in-place
    operation, although the sum of two unweighted fills is an unweighted
    fill (variances = counts), so that a histogram of several batches would
    lose its error bars."""
    known = getattr(total, "_variance_known", False) and getattr(part, "_variance_known", False)
    total += part
    if known:
        total._variance_known = True
    return total
