"""skxclust sets a short OpenMP spin (GOMP_SPINCOUNT) before torch loads, never over the
user's choice."""

import os
import subprocess
import sys

import pytest

from skxclust._openmp import SPIN_COUNT, set_short_spin


def test_sets_a_short_spin_when_unset_and_torch_not_loaded():
    environ = {}
    assert set_short_spin(environ, modules={})
    assert environ == {"GOMP_SPINCOUNT": SPIN_COUNT}


@pytest.mark.parametrize("users", [{"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "0"}])
def test_keeps_the_users_setting(users):
    environ = dict(users)
    assert not set_short_spin(environ, modules={})
    assert environ == users


def test_does_nothing_once_torch_is_loaded():
    environ = {}
    assert not set_short_spin(environ, modules={"torch": object()})
    assert environ == {}


@pytest.mark.parametrize("imports, expected", [
    ("import skxclust", f"{SPIN_COUNT} True"),
    ("import torch; import skxclust", "None False"),
])
def test_a_fresh_process_gets_the_short_spin_only_when_skxclust_loads_torch(imports,
                                                                            expected):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = (f"{imports}; import os; print(os.environ.get('GOMP_SPINCOUNT'), "
            "skxclust._openmp.SPIN_SET_BY_SKXCLUST)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120).stdout.strip()
    assert out == expected


def test_the_short_spin_is_a_count_libgomp_reads_far_below_its_default():
    # libgomp spins about 300,000 iterations by default: the point is to spin far less
    assert SPIN_COUNT.isdigit() and 0 < int(SPIN_COUNT) <= 30_000
