"""PNG plots of histograms with labelled axes (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from typing import Any


def _figure() -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 5), dpi=100)


def _weighted(h: Any) -> bool:
    """Whether ``h`` holds sums of weights (``Weight`` storage, as a
    weighted histogram of evflow's has), not counts of entries."""
    return type(h.storage_type()).__name__ == "Weight"


def _what(h: Any) -> str:
    return "Sum of weights" if _weighted(h) else "Entries"


def _ylabel(h: Any) -> str:
    ax = h.axes[0]
    widths = ax.widths
    if len(widths) and abs(max(widths) - min(widths)) <= 1e-9 * max(abs(max(widths)), 1.0):
        return f"{_what(h)} / {widths[0]:.3g}"
    return f"{_what(h)} / bin"


def _legend(h: Any, name: str) -> str:
    total = float(h.values().sum())
    return f"{name}: sum of weights {total:.6g}" if _weighted(h) else f"{name}: {total:.6g} entries"


def _categories(axis: Any) -> list[str] | None:
    """The category names of a categorical axis (``StrCategory``,
    ``IntCategory``: neither continuous nor ordered), else ``None``."""
    traits = getattr(axis, "traits", None)
    if traits is None or traits.continuous or traits.ordered:
        return None
    return [str(c) for c in axis]


def _label_categories(ax: Any, h: Any) -> None:
    """Names the bins of categorical axes on the plot's ticks."""
    for axis, ticks in zip(h.axes, (ax.set_xticks, ax.set_yticks), strict=False):
        names = _categories(axis)
        if names is not None:
            ticks(axis.centers, names)


def plot_histogram(
    h: Any, path: str | os.PathLike[str], *, title: str | None = None, name: str | None = None
) -> str:
    """Writes one histogram (1D: steps with error bars; 2D: colour map)."""
    import numpy as np

    name = name or getattr(h, "name", None) or "histogram"
    if h.ndim not in (1, 2):
        raise ValueError(f"histogram '{name}' has {h.ndim} axes; only 1D and 2D histograms are plotted")
    fig, ax = _figure()
    try:
        if h.ndim == 1:
            axis = h.axes[0]
            values = h.values()
            variances = h.variances()
            edges = axis.edges
            ax.stairs(
                values,
                edges,
                color="tab:blue",
                linewidth=1.5,
                label=_legend(h, name),
            )
            if variances is not None:
                ax.errorbar(
                    axis.centers,
                    values,
                    yerr=np.sqrt(variances),
                    fmt="none",
                    ecolor="tab:blue",
                    elinewidth=0.8,
                )
            ax.set_xlabel(axis.label or axis.name or name)
            ax.set_ylabel(_ylabel(h))
            ax.set_xlim(edges[0], edges[-1])
            ax.set_ylim(bottom=0)
        else:
            xa, ya = h.axes
            mesh = ax.pcolormesh(xa.edges, ya.edges, h.values().T, shading="flat")
            fig.colorbar(mesh, ax=ax, label=_what(h))
            ax.set_xlabel(xa.label or xa.name)
            ax.set_ylabel(ya.label or ya.name)
        _label_categories(ax, h)
        ax.set_title(title or name)
        if h.ndim == 1:
            ax.legend(loc="best", frameon=False)
        fig.tight_layout()
        out = os.fspath(path)
        fig.savefig(out)
        return out
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def plot_histograms(
    histograms: dict[str, Any], directory: str | os.PathLike[str], *, title_prefix: str = ""
) -> list[str]:
    """One PNG per 1D or 2D histogram, ``DIRECTORY/NAME.png``; those of
    more axes are left out, with a notice on stderr."""
    import sys

    from ._out_files import make_directory

    d = os.fspath(directory)
    make_directory(d, "plot")
    out = []
    for name, h in histograms.items():
        if h.ndim not in (1, 2):
            print(
                f"evflow: histogram '{name}' has {h.ndim} axes: not plotted (only 1D and 2D histograms are)",
                file=sys.stderr,
            )
            continue
        title = f"{title_prefix}: {name}" if title_prefix else name
        out.append(plot_histogram(h, os.path.join(d, f"{name}.png"), title=title, name=name))
    return out
