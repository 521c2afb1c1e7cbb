"""plot_centroids / plot_relevance return Figures with the expected panels and scales."""

import builtins

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from skxclust import ExplainableKMeans, plotting  # noqa: E402
from skxclust.plotting import plot_centroids, plot_relevance  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.random((60, 16))
    return ExplainableKMeans(n_clusters=3, random_state=0, device="cpu").fit(X), X


def _relevance_images(fig):
    return [ax.images[0] for ax in fig.axes if ax.images and ax.images[0].get_cmap().name == "bwr"]


def test_plot_centroids_draws_one_square_image_per_cluster(fitted):
    km, _ = fitted
    fig = plot_centroids(km)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3
    assert all(ax.images[0].get_array().shape == (4, 4) for ax in fig.axes)
    assert fig.axes[0].get_title().startswith("cluster 0\nn=")


def test_plot_centroids_shares_one_scale_and_one_labelled_colorbar():
    centers = np.array([[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 8.0]])
    fig = plot_centroids(centers, colorbar="pixel value")
    assert len(fig.axes) == 3  # two panels, one colorbar
    assert {ax.images[0].get_clim() for ax in fig.axes[:2]} == {(0.0, 8.0)}
    assert fig.axes[2].get_ylabel() == "pixel value"
    assert plot_centroids(centers, vmin=0, vmax=16).axes[0].images[0].get_clim() == (0, 16)
    own = plot_centroids(centers, shared_scale=False)
    assert own.axes[0].images[0].get_clim() == (0.0, 3.0)


def test_plot_relevance_shared_scale_draws_one_colorbar_saying_red_for_blue_against():
    R = np.array([[1.0, -2.0, 0.0, 0.5], [4.0, 0.0, -1.0, 0.0]])
    fig = plot_relevance(np.ones((2, 4)), R, show_sample=False, shared_scale=True)
    assert len(fig.axes) == 3
    assert "red for" in fig.axes[2].get_ylabel() and "blue against" in fig.axes[2].get_ylabel()


def test_plot_centroids_uses_given_image_shape_and_accepts_raw_centroids():
    fig = plot_centroids(np.zeros((5, 12)), image_shape=(3, 4), n_cols=2, titles=False)
    assert len(fig.axes) == 5
    assert fig.axes[0].images[0].get_array().shape == (3, 4)
    assert fig.axes[0].get_title() == ""


@pytest.mark.parametrize("image_shape", [None, (1, 7), (7, 1)])
def test_plot_centroids_draws_signals_as_curves(image_shape):
    centers = np.arange(14.0).reshape(2, 7)
    fig = plot_centroids(centers, image_shape=image_shape)
    assert not fig.axes[0].images
    np.testing.assert_array_equal(fig.axes[1].lines[-1].get_ydata(), centers[1])


def test_plot_centroids_draws_a_signal_clusters_aligned_members_behind_its_centroid():
    from skxclust import SpatialTransformerKMeans

    t = np.linspace(-1, 1, 30)
    X = np.stack([np.exp(-((t - c) ** 2) / 0.02) * (1 + k % 2) for k, c in
                  enumerate(np.linspace(-0.2, 0.2, 6))])
    st = SpatialTransformerKMeans(2, n_landmarks=4, n_steps=4, split_merge_moves=0,
                                  random_state=0).fit(X)
    fig = plot_centroids(st, X=X, max_members=2)
    counts = np.bincount(st.predict(X), minlength=2)
    for k, ax in enumerate(fig.axes):
        assert len(ax.lines) == min(counts[k], 2) + 1  # members, then the centroid
        np.testing.assert_array_equal(ax.lines[-1].get_ydata(), st.cluster_centers_[k])
    aligned = st.align(X)[st.predict(X) == 0][:2]
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), aligned[0])


def test_plot_centroids_draws_into_given_axes():
    fig, axes = plt.subplots(1, 3)
    assert plot_centroids(np.zeros((3, 4)), axes=axes) is fig


def test_plot_centroids_refuses_image_shape_that_does_not_fit():
    with pytest.raises(ValueError, match="image_shape"):
        plot_centroids(np.zeros((2, 16)), image_shape=(3, 5))


@pytest.mark.parametrize("image_shape", [16, [4, [2, 2]], b"\x04\x04", [True, 16], "44"],
                         ids=["int", "ragged", "bytes", "bool", "str"])
def test_plot_centroids_refuses_an_image_shape_that_is_not_a_pair_of_ints_naming_it(
        image_shape):
    with pytest.raises(ValueError) as refused:
        plot_centroids(np.zeros((2, 16)), image_shape=image_shape)
    if isinstance(image_shape, list):  # two entries: read as a pair
        expected = "must be None or a pair (H, W) of positive ints."
    else:  # not a pair: the channels of a signal, (C, 1, L), are named too
        expected = ("must be None, a pair (H, W) of positive ints, or (C, 1, L): C channels "
                    "of a signal of length L.")
    assert str(refused.value) == f"image_shape={image_shape!r} {expected}"


def test_plot_relevance_has_sample_and_heatmap_per_sample_plus_colorbars(fitted):
    km, X = fitted
    R = km.explain(X[:3])
    fig = plot_relevance(X[:3], R)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3 * 2 + 3  # (sample, relevance) per row, one colorbar each
    assert len(plot_relevance(X[:3], R, show_sample=False, colorbar=False).axes) == 3


def test_plot_relevance_colour_limits_are_symmetric_around_zero():
    rng = np.random.default_rng(1)
    R = rng.normal(size=(2, 16)) + 0.7  # mostly positive: limits must still be symmetric
    fig = plot_relevance(rng.random((2, 16)), R, colorbar=False)
    for img, row in zip(_relevance_images(fig), R):
        vmin, vmax = img.get_clim()
        assert vmin == -vmax == pytest.approx(-np.abs(row).max())


def test_plot_relevance_shared_scale_uses_global_maximum():
    R = np.array([[1.0, -2.0, 0.5, 0.0], [0.1, 0.2, -0.1, 0.0]])
    fig = plot_relevance(np.ones((2, 4)), R, shared_scale=True, colorbar=False)
    assert [img.get_clim() for img in _relevance_images(fig)] == [(-2.0, 2.0)] * 2


def test_plot_relevance_all_zero_map_gets_valid_limits():
    fig = plot_relevance(np.ones(4), np.zeros(4), colorbar=False)
    assert _relevance_images(fig)[0].get_clim() == (-1.0, 1.0)


def test_plot_relevance_overlay_draws_sample_contour():
    x = np.zeros((1, 16))
    x[0, 5:7] = 1.0
    fig = plot_relevance(x, x - 0.5, overlay=True, show_sample=False, colorbar=False)
    assert fig.axes[0].collections  # the contour set


def test_plot_relevance_1d_signal_shows_sample_line_over_strip():
    fig = plot_relevance(np.sin(np.arange(10.0)), np.cos(np.arange(10.0)), show_sample=False,
                         colorbar=False)
    assert len(fig.axes[0].lines) == 1


@pytest.mark.parametrize(
    ("X", "R", "match"),
    [
        (np.ones((2, 4)), np.ones((3, 4)), "same shape"),
        (np.ones((1, 4)), np.array([[np.nan, 0, 0, 0]]), "NaN"),
        (np.ones((0, 4)), np.ones((0, 4)), "non-empty"),
    ],
)
def test_plot_relevance_refuses_bad_input(X, R, match):
    with pytest.raises(ValueError, match=match):
        plot_relevance(X, R)


def test_missing_matplotlib_raises_import_error_naming_the_plot_extra(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"skxclust\[plot\]"):
        plotting.plot_centroids(np.zeros((2, 4)))


def test_plot_pixel_flipping_one_panel_per_group_and_into_given_axes():
    from skxclust.plotting import plot_pixel_flipping

    curve = [1.0, 0.5, 0.0]
    records = [{"dataset": d, "model": "m", "method": meth, "curve": curve, "area": 0.5}
               for d in ("a", "b") for meth in ("explain", "random")]
    fig = plot_pixel_flipping({"results": records})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [3, 3]  # two curves + the zero line
    _, ax = plt.subplots()
    assert plot_pixel_flipping(records[:2], ax=ax) is ax.figure
    assert "explain (0.500)" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="method"):
        plot_pixel_flipping([{"curve": curve}])


def test_plot_pixel_flipping_gives_a_method_one_colour_in_every_panel():
    from matplotlib.colors import to_hex

    from skxclust.plotting import plot_pixel_flipping

    curve = [1.0, 0.5, 0.0]
    # the second panel lists its methods in another order and lacks one
    records = ([{"dataset": "a", "method": m, "curve": curve}
                for m in ("occlusion", "explain", "random")]
               + [{"dataset": "b", "method": m, "curve": curve}
                  for m in ("explain", "random")])
    fig = plot_pixel_flipping(records)
    colours = [{line.get_label(): to_hex(line.get_color()) for line in ax.lines
                if not line.get_label().startswith("_")} for ax in fig.axes]
    assert colours[1] == {m: colours[0][m] for m in ("explain", "random")}
    assert len(set(colours[0].values())) == 3


def test_plot_alignment_draws_sample_aligned_and_centroid_per_row():
    import numpy as np
    from sklearn.datasets import load_digits

    from skxclust import SpatialTransformerKMeans
    from skxclust.plotting import plot_alignment

    X = load_digits().data[:40]
    st = SpatialTransformerKMeans(n_clusters=2, n_steps=3, max_iter=1, random_state=0,
                                  device="cpu").fit(X)
    fig = plot_alignment(st, X[:3])
    assert len(fig.axes) == 9
    assert [ax.get_title() for ax in fig.axes[:2]] == ["sample", "aligned"]
    np.testing.assert_allclose(fig.axes[0].images[0].get_array().ravel(), X[0])


def test_plot_alignment_refuses_an_estimator_without_align():
    import pytest
    from sklearn.cluster import KMeans

    from skxclust.plotting import plot_alignment

    with pytest.raises(TypeError, match="align"):
        plot_alignment(KMeans(2), [[0.0, 1.0, 2.0, 3.0]])


def test_plot_centroids_of_signals_with_members_make_room_for_the_members():
    # two members on either side of their centroid (0): they reach beyond every centroid
    centers = np.array([[0.0, 0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
    X = np.array([[0.0, 3.0, 0.0, -2.0, 0.0], [0.0, -3.0, 0.0, 2.0, 0.0],
                  [0.0, 0.0, 1.0, 0.0, 0.0]])  # 5 features: signals
    km = ExplainableKMeans(2, init=centers, max_iter=1).fit(X)
    lo, hi = plot_centroids(km, X=X).axes[0].get_ylim()
    assert lo <= X.min() and hi >= X.max()


def test_plot_centroids_of_constant_centroids_gets_a_unit_colour_range():
    clim = plot_centroids(np.full((2, 4), 0.5)).axes[0].images[0].get_clim()
    assert clim == (0.5, 1.5)


@pytest.mark.parametrize("n_clusters, n_cols", [(12, 10), (3, 3)])
def test_plot_centroids_lays_out_at_most_ten_columns(n_clusters, n_cols):
    fig = plot_centroids(np.zeros((n_clusters, 4)))
    columns = {round(ax.get_position().x0, 6) for ax in fig.axes if ax.images}
    assert len(columns) == n_cols


def test_plot_centroids_titles_give_an_empty_last_cluster_its_zero_size():
    from types import SimpleNamespace

    fitted_model = SimpleNamespace(cluster_centers_=np.zeros((3, 4)),
                                   labels_=np.array([0, 0, 1]))
    fig = plot_centroids(fitted_model)
    assert fig.axes[2].get_title() == "cluster 2\nn=0"


def test_plot_relevance_of_a_constant_signal_gets_a_unit_value_range():
    fig = plot_relevance(np.full(6, 2.0), np.ones(6), show_sample=False, colorbar=False)
    assert fig.axes[0].get_ylim() == (2.0, 3.0)


def test_plot_relevance_overlay_contours_the_sample_at_half_its_range():
    x = np.zeros((1, 16))
    x[0, 5:7] = 4.0
    fig = plot_relevance(x, x - 0.5, overlay=True, show_sample=False, colorbar=False)
    assert list(fig.axes[0].collections[0].levels) == [2.0]


@pytest.mark.parametrize("n_samples, n_cols", [(6, 4), (2, 2)])
def test_plot_relevance_lays_out_at_most_four_columns(n_samples, n_cols):
    fig = plot_relevance(np.ones((n_samples, 4)), np.ones((n_samples, 4)), show_sample=False,
                         colorbar=False)
    assert len({round(ax.get_position().x0, 6) for ax in fig.axes}) == n_cols


def test_plot_centroids_refuses_fewer_given_axes_than_clusters_and_rows_without_values():
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="axes"):
        plot_centroids(np.zeros((3, 4)), axes=axes)
    with pytest.raises(ValueError, match="non-empty"):
        plot_centroids(np.zeros((3, 0)))


def test_plot_pixel_flipping_into_one_axes_names_each_of_two_groups():
    from skxclust.plotting import plot_pixel_flipping

    records = [{"dataset": d, "model": "m", "method": "explain", "curve": [1.0, 0.0]}
               for d in ("a", "b")]
    _, ax = plt.subplots()
    plot_pixel_flipping(records, ax=ax)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a / m: explain",
                                                                    "b / m: explain"]


def test_draw_signal_stacks_channels_downwards_a_range_and_a_twentieth_apart():
    from skxclust._plot_signals import draw_signal

    centroid = np.array([0.0, 1.0, 2.0, 1.0, 0.0, 1.0])  # 2 channels of 3 samples
    members = np.array([[0.0, 3.0, 0.0, 0.0, 0.0, -1.0]])
    _, ax = plt.subplots()
    draw_signal(ax, centroid, members, None, channels=2)
    step = 1.05 * (3.0 - (-1.0))  # the range of the centroid and its members
    np.testing.assert_allclose(ax.lines[-1].get_ydata(), [1.0 - step, 0.0 - step, 1.0 - step])
    np.testing.assert_allclose(ax.get_ylim(), (-1.0 - step, 3.0))
    assert ax.get_xlim() == (0.0, 2.0)
    _, flat = plt.subplots()  # a constant signal: channels one unit apart
    draw_signal(flat, np.ones(6), None, None, channels=2)
    np.testing.assert_allclose(flat.lines[-1].get_ydata(), [0.0, 0.0, 0.0])


def test_draw_signal_of_one_channel_without_limits_autoscales_and_skips_no_members():
    from skxclust._plot_signals import draw_signal

    _, ax = plt.subplots()
    draw_signal(ax, np.array([0.0, 2.0, 1.0]), np.empty((0, 3)), None)
    assert len(ax.lines) == 1  # the centroid only
    lo, hi = ax.get_ylim()
    assert lo < 0.0 and hi > 2.0  # matplotlib's margins, not the data's exact range
