"""Shared test helpers."""

import importlib
import importlib.util
import sys
import types
import warnings

import numpy as np
import pytest
import torch


def import_zennit():
    """Import zennit, or skip.

    zennit imports torchvision unconditionally (only for its torchvision-model
    canonizers, which these tests do not use). Installing torchvision would pull a
    CUDA build of torch, so when torchvision is absent a minimal stand-in for the two
    classes zennit references is registered for the duration of the import only.
    """
    if importlib.util.find_spec("zennit") is None:
        pytest.skip("zennit not installed")
    if "zennit" in sys.modules:
        return sys.modules["zennit"]
    try:
        importlib.import_module("torchvision")
        return importlib.import_module("zennit")
    except ImportError:
        pass
    resnet = types.ModuleType("torchvision.models.resnet")
    resnet.Bottleneck = type("Bottleneck", (torch.nn.Module,), {})
    resnet.BasicBlock = type("BasicBlock", (torch.nn.Module,), {})
    models = types.ModuleType("torchvision.models")
    models.resnet = resnet
    stub = types.ModuleType("torchvision")
    stub.models = models
    names = ["torchvision", "torchvision.models", "torchvision.models.resnet"]
    sys.modules.update(dict(zip(names, [stub, models, resnet])))
    try:
        return importlib.import_module("zennit")
    finally:
        for name in names:
            sys.modules.pop(name, None)


def to_csr(X: torch.Tensor) -> torch.Tensor:
    """``X.to_sparse_csr()`` without torch's one-time "CSR support is in beta" notice."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return X.to_sparse_csr()


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a whole test module (tiny problems run faster on one), then
    the setting as it was. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(params=[0, 42])
def global_random_seed(request):
    """scikit-learn's seed fixture, for its tests ported in tests/test_sklearn_kmeans_*.py."""
    return request.param


@pytest.fixture(params=[np.float64, np.float32])
def global_dtype(request):
    """scikit-learn's dtype fixture, for its tests ported in tests/test_sklearn_kmeans_*.py."""
    return request.param


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def skip_array_api_check(check) -> None:
    """Skip scikit-learn's array-API estimator checks in this session: they need
    SCIPY_ARRAY_API=1 before scipy is imported, and tests/test_array_api.py runs them so,
    in a child process."""
    if getattr(check, "func", check).__name__.startswith("check_array_api"):
        pytest.skip("array-API checks run in tests/test_array_api.py (SCIPY_ARRAY_API=1)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Report a skip raised inside an installed package (e.g. scikit-learn's estimator
    checks raise ``unittest.SkipTest``, which pytest converts in its own unittest plugin)
    at the test that ran it, so ``-rs`` never points into the virtual environment."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        path, _, reason = report.longrepr
        if "site-packages" in str(path):
            report.longrepr = (item.location[0], item.location[1] + 1, reason)
