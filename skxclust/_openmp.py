"""The OpenMP wait policy, chosen before torch loads (imported first by ``skxclust``).

torch's CPU kernels run in an OpenMP thread pool (GNU libgomp in the Linux wheels). By
default an idle pool thread spins for a while before it sleeps, waiting for the next
parallel region. On a machine whose cores are all busy (a shared server, a laptop running
other work, a CI runner) the spinning threads take the CPU from the one thread that has
work, and the many small parallel regions of a k-means or warp loop can then take 10x
longer (see the README, "Threads"). ``OMP_WAIT_POLICY=PASSIVE`` makes idle threads sleep
at once. libgomp reads the variable once, when torch loads it, so it can only be set
before the first ``import torch`` of the process.
"""

from __future__ import annotations

import os
import sys

__all__ = ["OMP_WAIT_POLICY_SET_BY_SKXCLUST", "set_passive_wait_policy"]

OMP_WAIT_POLICY_SET_BY_SKXCLUST = False


def set_passive_wait_policy(environ=os.environ, modules=sys.modules) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it or torch is already loaded.

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
    if "OMP_WAIT_POLICY" in environ or "torch" in modules:
        return False
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True
