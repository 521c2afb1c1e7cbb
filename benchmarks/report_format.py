"""Markdown building blocks of the README's benchmark results section.

Number formats (ratios, durations, targets met or missed), markdown tables and the display
names of the data sets, shared by :mod:`benchmarks.report_runs` and
:mod:`benchmarks.report_sections`.
"""

from __future__ import annotations

DATA_NAMES = {"digits": "digits", "mnist5k": "MNIST-5k",
              "mnist5k_affine": "MNIST-5k, affine-deformed"}


def ratio(value: float) -> str:
    """A ratio with a times sign: ``374×``, ``62.0×``, ``1.99×``, ``0.0239×``."""
    size = abs(value)
    digits = ".0f" if size >= 100 else ".1f" if size >= 10 else ".2f" if size >= 0.1 else ".3g"
    return f"{value:{digits}}×"


def seconds(value: float) -> str:
    """A duration with a unit that keeps three significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale or unit == "µs":
            return f"{value / scale:.3g} {unit}"
    raise AssertionError  # pragma: no cover


def met(flag: bool | None) -> str:
    """``met`` / ``missed`` / ``–``."""
    return "–" if flag is None else "met" if flag else "missed"


def table(header: list[str], rows: list[list], align: str | None = None) -> str:
    """A markdown table; ``align`` has one ``l``/``r`` per column (all left by default)."""
    align = align or "l" * len(header)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def data_label(name: str, entry: dict | None = None) -> str:
    """Display name of a data set, with its shape when ``entry`` has it."""
    label = DATA_NAMES.get(name, name)
    if entry and "n_samples" in entry and "n_features" in entry:
        label += f" ({entry['n_samples']} × {entry['n_features']})"
    return label


def is_quick(data: dict) -> bool:
    """Whether a result file comes from a ``--quick`` run."""
    return bool(data.get("quick") or data.get("settings", {}).get("quick"))
