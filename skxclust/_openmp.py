"""The OpenMP spin time, chosen before torch loads (imported first by ``skxclust``).

torch's CPU kernels run in an OpenMP thread pool (GNU libgomp in the Linux wheels). By
default an idle pool thread spins for a long while (about 300,000 iterations) before it
sleeps, waiting for the next parallel region. On a machine whose cores are all busy (a
shared server, a laptop running other work, a CI runner) the spinning threads take the CPU
from the one thread that has work, and the many small parallel regions of a k-means or
warp loop can then take 10x longer. Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) cures
that but makes every parallel region pay a wake-up on a quiet machine. A short spin,
``GOMP_SPINCOUNT=3000``, keeps most of both. Measured on 2 cores, ExplainableKMeans on
MNIST-5k (float64, n_init=10, 2 threads), three fits each (seconds, quiet machine / one
other busy process): libgomp's default 0.71-0.99 / 18.9-21.2, ``GOMP_SPINCOUNT=3000``
0.89-1.28 / 3.9-5.2, ``OMP_WAIT_POLICY=PASSIVE`` 3.5-4.7 / 1.5-1.7.

libgomp reads the variables once, when torch loads it, so they can only be set before the
first ``import torch`` of the process.
"""

from __future__ import annotations

import os
import sys

__all__ = ["SPIN_COUNT", "SPIN_SET_BY_SKXCLUST", "set_short_spin"]

SPIN_COUNT = "3000"
SPIN_SET_BY_SKXCLUST = False


def set_short_spin(environ=os.environ, modules=sys.modules) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` unless the user chose a wait policy or
    spin count, or torch is already loaded.

    Parameters
    ----------
    environ : mapping, default=os.environ
        The environment to read and change (changing ``os.environ`` also changes the
        process environment that libgomp reads, and child processes inherit it).
    modules : mapping, default=sys.modules
        Loaded modules: nothing is set when ``"torch"`` is among them (too late to matter).

    Returns
    -------
    bool
        True when the variable was set here.
    """
    chosen = "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ
    if chosen or "torch" in modules:
        return False
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True
