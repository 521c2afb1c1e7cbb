"""skxclust sets OMP_WAIT_POLICY=PASSIVE before torch loads, never over the user's choice."""

import os
import subprocess
import sys

import pytest

from skxclust._openmp import set_passive_wait_policy


def test_sets_passive_when_unset_and_torch_not_loaded():
    environ = {}
    assert set_passive_wait_policy(environ, modules={})
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_keeps_the_users_setting():
    environ = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not set_passive_wait_policy(environ, modules={})
    assert environ == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_does_nothing_once_torch_is_loaded():
    environ = {}
    assert not set_passive_wait_policy(environ, modules={"torch": object()})
    assert environ == {}


@pytest.mark.parametrize("imports, expected", [
    ("import skxclust", "PASSIVE True"),
    ("import torch; import skxclust", "None False"),
])
def test_a_fresh_process_gets_passive_only_when_skxclust_loads_torch(imports, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = (f"{imports}; import os; print(os.environ.get('OMP_WAIT_POLICY'), "
            "skxclust._openmp.OMP_WAIT_POLICY_SET_BY_SKXCLUST)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120).stdout.strip()
    assert out == expected
