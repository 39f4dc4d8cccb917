"""Reports written as strict JSON.

A report may hold non-finite numbers (``break_even_events`` is ``inf``
where offloading never pays). Python's ``json`` writes them as
``Infinity``/``NaN``, which strict readers (``jq``, JavaScript, most other
languages' parsers) refuse; they are written as the strings ``"inf"``,
``"-inf"`` and ``"nan"`` instead, which ``float()`` reads back.
"""

from __future__ import annotations

import json
import math
from typing import Any


def strict(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its name.

    >>> strict({"a": [1.0, float("inf")], "b": float("nan")})
    {'a': [1.0, 'inf'], 'b': 'nan'}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` of :func:`strict` ``(value)``, refusing anything non-finite left.

    >>> dumps({"break_even_events": float("inf")})
    '{"break_even_events": "inf"}'
    """
    return json.dumps(strict(value), allow_nan=False, **options)
