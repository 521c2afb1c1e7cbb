"""Signals of several channels (``image_shape=(C, 1, L)``): one time warp for all channels."""

import pickle

import matplotlib
import numpy as np
import pytest
import torch

from skxclust import SpatialTransformerKMeans
from skxclust._shapes import resolve_warp_shape
from skxclust.metrics import clustering_accuracy
from skxclust.nn import make_warp_model
from skxclust.nn.appearance import thickness_channel
from skxclust.nn.graduated import auto_blur_widths, blur_images
from skxclust.nn.monotone import folds, warp_slopes
from skxclust.nn.pyramid import coarse_shape
from skxclust.nn.shift_search import shift_energies, shift_start, translation_params
from skxclust.nn.warp_inverse import unwarp_images
from skxclust.nn.warps import warp_images

matplotlib.use("Agg")

C, L = 3, 40


def per_channel(rows: torch.Tensor) -> list[torch.Tensor]:
    """The channels (N, L) of rows (N, C * L)."""
    return list(rows.reshape(rows.shape[0], C, L).unbind(1))


@pytest.mark.parametrize("transform", ["tps", "affine", "affine+tps"])
def test_channel_model_warps_every_channel_as_the_one_channel_model(transform):
    channels = make_warp_model((C, 1, L), 16, transform, torch.float64)
    single = make_warp_model((1, L), 16, transform, torch.float64)
    assert (channels.shape, channels.channels, channels.ndim) == ((C, L), C, 1)
    assert channels.input_shape == (C, 1, L) and channels.length == L
    generator = torch.Generator().manual_seed(0)
    mu = torch.randn(2, C * L, dtype=torch.float64, generator=generator)
    params = 0.1 * torch.randn(2, 5, single.n_basis, 1, dtype=torch.float64,
                               generator=generator)
    warped = warp_images(mu, channels, params).reshape(2, 5, C, L)
    for c, mu_c in enumerate(per_channel(mu)):
        # each channel is sampled on its own row: exactly the 1-D warp of that channel
        torch.testing.assert_close(warped[:, :, c], warp_images(mu_c, single, params),
                                   rtol=0, atol=1e-12)
    x = warped[0, :3].reshape(3, C * L)
    back = unwarp_images(x, channels, params[0, :3]).reshape(3, C, L)
    for c, x_c in enumerate(per_channel(x)):
        torch.testing.assert_close(back[:, c], unwarp_images(x_c, single, params[0, :3]),
                                   rtol=0, atol=1e-12)


def test_channel_warp_slopes_are_those_of_time_only():
    model = make_warp_model((C, 1, L), 16, "tps", torch.float64)
    identity = torch.zeros(2, model.n_params, dtype=torch.float64)
    slopes = warp_slopes(model, identity)
    assert slopes.shape == (2, L - 1)
    torch.testing.assert_close(slopes, torch.ones_like(slopes))
    assert not bool(folds(model, identity).any())


def test_channel_shift_energies_sum_the_channels():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, C * L, dtype=torch.float64, generator=generator)
    mu = torch.randn(2, C * L, dtype=torch.float64, generator=generator)
    summed = sum(shift_energies(x_c, mu_c) for x_c, mu_c in zip(per_channel(x),
                                                                  per_channel(mu)))
    torch.testing.assert_close(shift_energies(x, mu, channels=C), summed)


def test_channel_shift_start_finds_the_shift_shared_by_the_channels():
    model = make_warp_model((C, 1, L), 16, "tps", torch.float64)
    generator = torch.Generator().manual_seed(2)
    mu = torch.zeros(1, C, L, dtype=torch.float64)
    for c in range(C):  # a peak per channel, at different times
        mu[0, c, 8 + 6 * c] = 1.0 + c
    x = torch.roll(mu, 5, dims=-1) + 0.01 * torch.randn(1, C, L, dtype=torch.float64,
                                                        generator=generator)
    start = shift_start(x.reshape(1, -1), mu.reshape(1, -1), model, penalty=1e-3,
                        gram=model.penalty_gram())
    unit = translation_params(model)
    shift = float(start[0] @ unit / (unit @ unit)) * (L - 1) / 2  # in samples
    assert shift == pytest.approx(-5.0, abs=1e-9)  # the centroid sampled 5 samples earlier


def test_channel_blur_coarse_level_and_thickness_stay_within_each_channel():
    spike = torch.zeros(1, C * L, dtype=torch.float64)
    spike[0, L + 20] = 1.0  # channel 1
    for out in (blur_images(spike, (C, 1, L), 2.0), thickness_channel(spike, (C, 1, L))):
        rows = out.reshape(C, L)
        assert float(rows[0].abs().sum()) == 0.0 and float(rows[2].abs().sum()) == 0.0
        assert float(rows[1].abs().sum()) > 0.0
    assert coarse_shape((C, 1, 80)) == (C, 1, 40) and coarse_shape((C, 1, 12)) is None
    assert auto_blur_widths((C, 1, 300)) == ()


@pytest.mark.parametrize("min_side, expected", [(2, (C, 1, 6)), (6, (C, 1, 6)), (7, None)])
def test_coarse_shape_of_channels_honours_min_side(min_side, expected):
    # the time axis of a (C, 1, L) signal is held to the min_side the caller gives
    assert coarse_shape((C, 1, 12), min_side=min_side) == expected


def make_channel_set(n_per_class, seed, max_shift=8):
    """Two classes of 3-channel series (an up-down or a down-up pattern per channel, in
    different channels), every series shifted in time by its own random amount that all
    its channels share."""
    rng = np.random.default_rng(seed)
    t = np.arange(L)
    patterns = np.zeros((2, C, L))
    for c in range(C):
        bump = np.exp(-0.5 * ((t - 12 - 5 * c) / 2.0) ** 2)
        dip = np.exp(-0.5 * ((t - 18 - 5 * c) / 2.0) ** 2)
        patterns[0, c], patterns[1, c] = bump - dip, dip - bump
    X, y = [], []
    for label in (0, 1):
        for _ in range(n_per_class):
            shifted = np.roll(patterns[label], rng.integers(-max_shift, max_shift + 1), -1)
            X.append(shifted + 0.05 * rng.standard_normal((C, L)))
            y.append(label)
    return np.asarray(X).reshape(len(X), C * L), np.asarray(y)


def test_channel_fit_clusters_series_shifted_in_time_held_out():
    X, y = make_channel_set(20, seed=0)
    X_test, y_test = make_channel_set(20, seed=1)
    st = SpatialTransformerKMeans(2, image_shape=(C, 1, L), random_state=0).fit(X)
    assert st.image_shape_ == (C, 1, L)
    np.testing.assert_array_equal(st.predict(X), st.labels_)
    assert clustering_accuracy(y_test, st.predict(X_test)) == 1.0
    R = st.explain(X_test[:5])
    f = st.decision_function(X_test[:5])
    assert R.shape == (5, C * L)
    np.testing.assert_allclose(R.sum(1), f.max(1), rtol=1e-5, atol=1e-9 * np.abs(f).max())
    # the evidence is the margin of the warped distances of every channel together
    d = st.transform(X_test[:5]) ** 2
    np.testing.assert_allclose(f.max(1), np.sort(d, 1)[:, 1] - d.min(1), rtol=1e-9)
    aligned = st.align(X_test[:5])
    assert aligned.shape == (5, C * L)
    again = pickle.loads(pickle.dumps(st))
    np.testing.assert_array_equal(again.predict(X_test), st.predict(X_test))


def test_one_channel_shape_is_the_plain_signal():
    X, _ = make_channel_set(6, seed=3)
    X = X[:, :L]  # channel 0 only
    kwargs = dict(n_clusters=2, random_state=0, max_iter=2)
    a = SpatialTransformerKMeans(image_shape=(1, 1, L), **kwargs).fit(X)
    b = SpatialTransformerKMeans(image_shape=(1, L), **kwargs).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=0, atol=1e-12)


@pytest.mark.parametrize("image_shape", [(3, 2, 20), (0, 1, 120), (3, 1, 41), (3, 1, 39),
                                         (3.0, 1, 40), (True, 1, 120), (3, 1, 40, 1)])
def test_bad_channel_shapes_are_refused_naming_image_shape(image_shape):
    with pytest.raises(ValueError, match=r"image_shape=.*" + r"\(" + str(image_shape[0])):
        resolve_warp_shape(image_shape, C * L)
    X, _ = make_channel_set(3, seed=0)
    with pytest.raises(ValueError, match="image_shape="):
        SpatialTransformerKMeans(2, image_shape=image_shape).fit(X)


@pytest.mark.parametrize("image_shape", [(120,), [120], np.array([120]), "120"], ids=repr)
def test_a_shape_neither_a_pair_nor_channels_is_refused_naming_every_accepted_form(
        image_shape):
    with pytest.raises(ValueError, match=r"must be None, a pair \(H, W\) of positive ints, "
                                         r"or \(C, 1, L\)"):
        resolve_warp_shape(image_shape, C * L)


def test_plot_centroids_draws_every_channel_as_a_curve():
    from skxclust.plotting import plot_centroids

    X, _ = make_channel_set(5, seed=4)
    st = SpatialTransformerKMeans(2, image_shape=(C, 1, L), random_state=0,
                                  max_iter=2).fit(X)
    fig = plot_centroids(st)
    for ax in fig.axes:
        assert len(ax.lines) == C  # one curve per channel, nothing else
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"ch {c}" for c in range(C)]
    fig_members = plot_centroids(st, X=X, max_members=2)
    members = np.bincount(st.labels_, minlength=2).clip(max=2)
    assert [len(ax.lines) for ax in fig_members.axes] == list(C * (members + 1))
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig_members)


def test_channel_fits_blur_and_thicken_along_time_only(monkeypatch):
    """The graduated fits and the thickness channel of a fit get the (C, 1, L) shape (never
    a C x L image, which would mix the channels)."""
    import skxclust.nn.appearance as appearance
    import skxclust.nn.graduated as graduated

    shapes = []
    for module, name in ((graduated, "blur_images"), (appearance, "thickness_channel")):
        original = getattr(module, name)

        def recording(images, shape, *args, _original=original):
            shapes.append(tuple(shape))
            return _original(images, shape, *args)

        monkeypatch.setattr(module, name, recording)
    X, _ = make_channel_set(4, seed=5)
    SpatialTransformerKMeans(2, image_shape=(C, 1, L), centroid_blur=(2.0,),
                             appearance="intensity+thickness", random_state=0,
                             max_iter=1).fit(X)
    assert (C, 1, L) in shapes
    assert all(len(s) == 3 or s[0] == 1 for s in shapes), set(shapes)


def test_relevance_and_alignment_of_channels_are_drawn_as_channel_by_time_maps():
    import matplotlib.pyplot as plt

    from skxclust.plotting import plot_alignment, plot_relevance

    X, _ = make_channel_set(4, seed=6)
    st = SpatialTransformerKMeans(2, image_shape=(C, 1, L), random_state=0,
                                  max_iter=2).fit(X)
    for fig in (plot_relevance(X[:2], st.explain(X[:2]), image_shape=(C, 1, L),
                               overlay=True),
                plot_alignment(st, X[:2])):
        maps = [ax.images[0].get_array().shape for ax in fig.axes if ax.images]
        assert maps and all(shape == (C, L) for shape in maps)
        plt.close(fig)
