"""A model fitted on a GPU pickles to CPU-only state and loads where CUDA is hidden."""

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import requires_cuda

from skxclust import ExplainableKMeans, SpatialTransformerKMeans

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.random((3, 16))[k] * 4 + 0.3 * RNG.standard_normal((20, 16))
                    for k in range(3)])  # 60 rows, 4 x 4 images, 3 groups


def make(kind: str, device: str):
    """An unfitted estimator of ``kind``; "deep" has a feature extractor on ``device``."""
    if kind == "explainable":
        return ExplainableKMeans(n_clusters=3, random_state=0, device=device)
    if kind == "deep":
        torch.manual_seed(0)
        extractor = torch.nn.Sequential(torch.nn.Linear(16, 8, dtype=torch.float64),
                                        torch.nn.ReLU()).to(device)
        return ExplainableKMeans(n_clusters=3, random_state=0, device=device,
                                 feature_extractor=extractor)
    return SpatialTransformerKMeans(n_clusters=3, n_steps=3, n_landmarks=4, max_iter=3,
                                    random_state=0, device=device)


KINDS = ["explainable", "deep", "st"]


class DeviceRecorder(pickle.Pickler):
    """Pickles normally and records the device of every torch tensor it meets."""

    def __init__(self, file):
        super().__init__(file)
        self.devices = []

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor):
            self.devices.append(obj.device.type)
        return NotImplemented


def pickled_tensor_devices(obj) -> list:
    recorder = DeviceRecorder(io.BytesIO())
    recorder.dump(obj)
    return recorder.devices


@pytest.mark.parametrize("kind", KINDS)
def test_pickled_state_holds_torch_tensors_only_on_the_cpu(kind):
    est = make(kind, "cpu").fit(X)
    devices = pickled_tensor_devices(est)
    assert set(devices) <= {"cpu"}
    assert bool(devices) == (kind == "deep")  # only the extractor's weights are tensors
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_pickling_leaves_the_estimator_and_its_extractor_untouched():
    est = make("deep", "cpu").fit(X)
    extractor = est.feature_extractor
    pickle.dumps(est)
    assert est.feature_extractor is extractor


LOAD_WITHOUT_CUDA = """
import pickle, sys
import numpy as np
import torch
assert not torch.cuda.is_available()
est = pickle.load(open(sys.argv[1], "rb"))
X = np.load(sys.argv[2])
np.save(sys.argv[3], est.set_params(device="cpu").predict(X))
"""


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("kind", KINDS)
def test_a_model_fitted_on_cuda_loads_and_predicts_with_cuda_hidden(kind, tmp_path):
    est = make(kind, "cuda").fit(X)
    for name, value in vars(est).items():
        if name.endswith("_") and not name.startswith("_"):
            assert not isinstance(value, torch.Tensor), name
    assert set(pickled_tensor_devices(est)) <= {"cpu"}
    with open(tmp_path / "model.pkl", "wb") as f:
        pickle.dump(est, f)
    np.save(tmp_path / "X.npy", X)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-c", LOAD_WITHOUT_CUDA, str(tmp_path / "model.pkl"),
                    str(tmp_path / "X.npy"), str(tmp_path / "labels.npy")],
                   env=env, check=True, timeout=300)
    on_cpu = np.load(tmp_path / "labels.npy")
    # the same model: the same labels, not a permutation of them
    np.testing.assert_array_equal(on_cpu, est.predict(X))
