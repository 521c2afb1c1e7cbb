"""The provenance table of the README's benchmark results section.

Which run each result file comes from (date, commit, CPUs, load average) and the library
versions and platform the files share, read from each file's ``machine`` block whatever
its layout.
"""

from __future__ import annotations

from benchmarks.report_format import is_quick, table

VERSION_KEYS = ("python", "torch", "scikit-learn", "numpy", "scipy")
VERSION_NAMES = {"python": "Python"}


def _load(machine: dict, data: dict, when: str) -> float | None:
    """1-minute load average at the start or end of a run, from any file layout."""
    keys = {"start": ("load_average_start", "load_average_at_start",
                      "load_average_1_5_15_start"),
            "end": ("load_average_end", "load_average_1_5_15_end")}[when]
    value = next((machine[k] for k in keys if machine.get(k) is not None), None)
    if value is None and when == "end":
        value = data.get("load_average_at_end")
    if isinstance(value, str):
        value = [float(v) for v in value.split()]
    return None if not value else float(value[0])


def _versions(machine: dict) -> dict:
    nested = machine.get("versions", {})
    flat = {"python": machine.get("python"), "torch": machine.get("torch"),
            "scikit-learn": machine.get("sklearn"), "numpy": machine.get("numpy"),
            "scipy": machine.get("scipy")}
    return {k: nested.get(k) or flat.get(k) for k in VERSION_KEYS}


def _openmp(machine: dict) -> str:
    """The OpenMP wait setting a run had: the benchmark's own ``OMP_WAIT_POLICY`` (files
    from before the benchmarks ran what users run) or skxclust's ``GOMP_SPINCOUNT``."""
    policy, spin = machine.get("omp_wait_policy"), machine.get("gomp_spincount")
    if policy:
        return f"OMP_WAIT_POLICY={policy}"
    return f"GOMP_SPINCOUNT={spin}" if spin else "libgomp default"


def runs_section(files: dict[str, dict]) -> str:
    """Which run each file comes from: date, commit, CPUs, load; the shared versions."""
    rows, versions, platforms = [], set(), set()
    for name, data in files.items():
        m = data.get("machine", {})
        date = (m.get("date_utc") or m.get("date") or "?")[:16].replace("T", " ")
        commit = (m.get("git") or {}).get("commit")
        if commit and (m.get("git") or {}).get("dirty"):
            commit += " (modified)"
        start, end = _load(m, data, "start"), _load(m, data, "end")
        load = " → ".join(f"{v:.2f}" for v in (start, end) if v is not None) or "–"
        rows.append([f"`{name}.json`", "quick" if is_quick(data) else "full", date,
                     commit or "–", f"{m.get('cpu_count', '?')} / {m.get('torch_threads', '?')}",
                     _openmp(m), load])
        versions.add(tuple(_versions(m).items()))
        system = str(m.get("platform", "?")).split("-")[0]
        platforms.add(f"{system}, {m.get('processor', '?')}"
                      + (f", CUDA {m['cuda_device']}" if m.get("cuda_device") else ""))
    text = table(["result file", "run", "date (UTC)", "commit", "CPUs / torch threads",
                  "OpenMP wait", "load average (1 min) start → end"], rows)
    if len(versions) == 1:
        shared = ", ".join(f"{VERSION_NAMES.get(k, k)} {v}" for k, v in next(iter(versions)) if v)
        text += f"\n\nVersions: {shared}."
    else:
        text += "\n\nVersions differ between the files; each file's `machine` block has them."
    if len(platforms) == 1:
        text += f" Platform: {next(iter(platforms))}."
    return text
