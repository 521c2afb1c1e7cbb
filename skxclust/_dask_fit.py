"""``fit`` for dask arrays: blockwise Lloyd passes reduced on the client.

A first pass reduces moments of the blocks (centring shift, variance for ``tol``, range,
finiteness). Every Lloyd iteration is then one pass in which each block is assigned to the
current centroids and reduced to the geometry's partial sums, the weight of every cluster,
the inertia, the number of changed labels and the rows farthest from their centroid (for
relocating empty clusters). The client forms the next centroids with the geometry's own
update: ``centers_from_sums`` for plain k-means; for ST K-means the conjugate-gradient
solve of :func:`skxclust.nn.centroid_update.solve_normal_equations`, whose normal operator
``sum_i S_i^T S_i p`` is one more blockwise pass over the kept warps per CG step. Labels
and ST warps stay on the workers between passes (``dask.persist``); only O(K * D)
statistics, the seeding sample and the final labels reach the client. The iterations,
convergence tests and retiring of restarts are those of the in-memory loop (both run
:func:`skxclust._lloyd.lloyd_iterations`); empty clusters receive the farthest rows (for
plain k-means with scikit-learn's rule of :mod:`skxclust._relocation`, the rows taken
farthest first where scikit-learn takes them in ``np.argpartition``'s order, which only
matters when several clusters are empty at once), so the same initial centroids give the
same fit up to the order of floating-point sums: for plain k-means, and for ST K-means
with ``split_merge_moves=0`` (a dask fit makes no moves) and float64 warps.

:func:`fit_blockwise` takes the validated dask array, the weights and the estimator's
callables (embedding, geometry, seeding, statistics) and returns a
:class:`skxclust._lloyd.FitResult`: the estimator validates before and writes its
attributes after, as for the in-memory fit.
"""

from __future__ import annotations

import functools
import uuid

import numpy as np
import torch

from ._geometry import Farthest
from ._lloyd import FitResult, best_index, lloyd_iterations, scaled_tol
from ._threads import pass_threads
from ._validation import check_magnitude, resolve_device, to_tensor

__all__ = ["INIT_SAMPLE", "fit_blockwise"]

INIT_SAMPLE = 4096  # rows drawn (uniformly, without replacement) to seed a dask fit
_SHARED_MODELS: dict[str, dict] = {}  # per process: warp models of the latest fits


# -- fit: what runs on the workers -----------------------------------------------------------
class _Frame:
    """What a worker needs to turn a block into the fit's tensors; picklable.

    Holds the estimator's ``embed`` and ``make_geometry`` callables (of an unfitted
    clone), the ``device`` parameter (resolved where the task runs), the dtype and the
    centring shift (None before it is known).
    """

    def __init__(self, embed, make_geometry, device, dtype, shift=None):
        self.embed = embed
        self.make_geometry = make_geometry
        self.device = device
        self.dtype = np.dtype(dtype)
        self.shift = None if shift is None else np.asarray(shift)
        self.token = uuid.uuid4().hex  # names this fit in the per-process model cache

    def with_shift(self, shift):
        frame = _Frame.__new__(_Frame)
        frame.__dict__.update(self.__dict__, shift=np.asarray(shift))
        return frame

    def tensors(self, x, w=None):
        device = resolve_device(self.device)
        X = self.embed(to_tensor(np.asarray(x, dtype=self.dtype), device))
        if self.shift is not None:
            X = X - torch.as_tensor(self.shift, device=device)
        sw = None if w is None else torch.as_tensor(np.asarray(w, dtype=self.dtype),
                                                    device=device).reshape(-1)
        return X, sw

    def geometry(self):
        """The fit's geometry; its derived models (read-only, built once per process and
        fit, not per task: a warp model costs 15-40 ms) are shared between tasks."""
        geometry = self.make_geometry()
        if self.token not in _SHARED_MODELS:
            while len(_SHARED_MODELS) >= 4:
                _SHARED_MODELS.pop(next(iter(_SHARED_MODELS)), None)
            _SHARED_MODELS[self.token] = {}
        geometry.use_model_cache(_SHARED_MODELS[self.token])
        return geometry


def _moments_block(x, w, frame):
    """Finiteness, weighted column sums, range and (count, mean, M2) of one block."""
    finite = bool(np.isfinite(x).all())
    if not finite or x.shape[0] == 0:
        return {"finite": finite, "n": x.shape[0]}
    X, sw = frame.tensors(x, w)
    X64 = X.to(torch.float64)
    mean = X64.mean(dim=0)
    return {"finite": True, "n": X.shape[0], "wsum": float(sw.to(torch.float64).sum()),
            "wx": sw.to(torch.float64) @ X64, "mean": mean,
            "m2": ((X64 - mean) ** 2).sum(dim=0), "lo": X.amin(dim=0), "hi": X.amax(dim=0)}


def _merge_moments(a, b):
    if not (a["finite"] and b["finite"]):
        return {"finite": False, "n": a["n"] + b["n"]}
    if "mean" not in a or "mean" not in b:
        return b if "mean" not in a else a
    n = a["n"] + b["n"]
    delta = b["mean"] - a["mean"]
    return {"finite": True, "n": n, "wsum": a["wsum"] + b["wsum"], "wx": a["wx"] + b["wx"],
            "mean": a["mean"] + delta * (b["n"] / n),
            "m2": a["m2"] + b["m2"] + delta**2 * (a["n"] * b["n"] / n),
            "lo": torch.minimum(a["lo"], b["lo"]), "hi": torch.maximum(a["hi"], b["hi"])}


def _lloyd_block(x, w, prev, centers, running, offset, frame):
    """One Lloyd pass over a block for the ``running`` restarts.

    ``prev`` is this block's result of the previous pass (None at the first): labels
    (R, n_b) and states of every restart. Returns the updated result, with the statistics
    of the running restarts under "stats".
    """
    X, sw = frame.tensors(x, w)
    geometry = frame.geometry()
    c = torch.as_tensor(centers, device=X.device)
    n_clusters, n_rows = c.shape[1], X.shape[0]
    with pass_threads(geometry.pass_work(X, c[0])):
        labels, dists, states, sums, weight = geometry.restart_sums(X, sw, c)
    n_run = len(running)
    if prev is None:
        result = {"labels": labels, "states": states}
        changed = torch.full((n_run,), n_rows, dtype=torch.long)
    else:
        result = {"labels": prev["labels"].clone(), "states": list(prev["states"])}
        changed = (labels != prev["labels"][running]).sum(dim=1).cpu()
        result["labels"][running] = labels
        for i, r in enumerate(running):
            result["states"][r] = states[i]
    cluster_weight = torch.zeros(n_run, n_clusters, dtype=torch.float64, device=X.device)
    cluster_weight.scatter_add_(1, labels, sw.to(torch.float64).expand(n_run, -1))
    m = min(n_clusters, n_rows)
    far = torch.argsort(-dists, dim=1, stable=True)[:, :m]
    result["stats"] = {
        "sums": sums.to(torch.float64).cpu(), "weight": weight.to(torch.float64).cpu(),
        "cluster_weight": cluster_weight.cpu(), "changed": changed,
        "inertia": (dists.to(torch.float64) @ sw.to(torch.float64)).cpu(),
        "far_d": dists.gather(1, far).to(torch.float64).cpu(),
        "far_i": (far + offset).cpu(), "far_x": X[far].cpu(),
        "far_w": sw[far].to(torch.float64).cpu(), "far_l": labels.gather(1, far).cpu(),
    }
    return result


_FAR = ("far_d", "far_i", "far_x", "far_w", "far_l")


def _top_far(a, b, m):
    """Merge two top lists of the farthest rows (distance, index, row, weight, label):
    largest distance, then lowest index."""
    d = torch.cat([a["far_d"], b["far_d"]], dim=1)
    i = torch.cat([a["far_i"], b["far_i"]], dim=1)
    order = torch.argsort(i, dim=1)
    order = order.gather(1, torch.argsort(-d.gather(1, order), dim=1, stable=True))[:, :m]
    rows = torch.arange(d.shape[0])[:, None]
    return {k: torch.cat([a[k], b[k]], dim=1)[rows, order] for k in _FAR}


def _merge_stats(a, b):
    out = {k: a[k] + b[k] for k in ("sums", "weight", "cluster_weight", "changed", "inertia")}
    out.update(_top_far(a, b, a["cluster_weight"].shape[1]))
    return out


def _normal_block(w, result, vectors, running, frame):
    """``sum_{i in block} w_i S_i^T S_i v_{l_i}`` for every running restart's vectors."""
    geometry = frame.geometry()
    device = resolve_device(frame.device)
    v = torch.as_tensor(vectors, device=device)
    sw = torch.as_tensor(np.asarray(w, dtype=frame.dtype), device=device).reshape(-1)
    out = [geometry.normal_sums(v[i], result["labels"][r], result["states"][r], sw)
           for i, r in enumerate(running)]
    return torch.stack(out).to(torch.float64).cpu()


def _statistics_block(x, result, restart, centers, frame, statistics):
    X, _ = frame.tensors(x)
    c = torch.as_tensor(centers, device=X.device)
    return statistics(X, result["labels"][restart], c, frame.geometry())


def _labels_block(result, restart):
    return result["labels"][restart].cpu().numpy()


# -- fit: the client --------------------------------------------------------------------------
def _reduce(merge, key, *parts):
    """``merge`` folded over ``parts`` (their entry ``key`` when given)."""
    return functools.reduce(merge, [p[key] for p in parts] if key else parts)


def _tree(items, merge, key=None, fan_in=16):
    """Tree reduction of delayed values with ``merge``, ``fan_in`` values per task (few
    tasks: each costs a scheduler round trip, the values are small)."""
    import dask

    items = list(items)
    while True:
        items = [dask.delayed(_reduce)(merge, key, *items[i:i + fan_in])
                 for i in range(0, len(items), fan_in)]
        key = None
        if len(items) == 1:
            return items[0]


def _add(a, b):
    if isinstance(a, dict):
        return {k: a[k] + b[k] for k in a}
    return a + b


class _Blocks:
    """The non-empty delayed row blocks of X and of the weights, with their row offsets."""

    def __init__(self, X, weights):
        sizes = np.asarray(X.chunks[0], dtype=np.int64)
        keep = sizes > 0
        self.x = [b for b, k in zip(X.to_delayed().ravel(), keep) if k]
        self.w = [b for b, k in zip(weights.to_delayed().ravel(), keep) if k]
        self.weights = weights  # holds the persisted weight blocks
        self.offsets = (np.cumsum(sizes) - sizes)[keep].tolist()

    def run(self, function, *args, results=None, **kwargs):
        """Persist ``function(x, w, result, *args, offset, **kwargs)`` per block (result
        None without ``results``); returns the persisted delayed values."""
        import dask

        previous = results if results is not None else [None] * len(self.x)
        tasks = [dask.delayed(function, pure=False)(x, w, r, *args, off, **kwargs)
                 for x, w, r, off in zip(self.x, self.w, previous, self.offsets)]
        return list(dask.persist(*tasks))


def _lloyd_pass(blocks, results, centers, running, frame):
    """One fused assignment + partial-sums pass; (new results, reduced statistics)."""
    results = blocks.run(_lloyd_block, centers.cpu().numpy(), list(running), frame=frame,
                         results=results)
    return results, _tree(results, _merge_stats, key="stats").compute()


def _update(geometry, blocks, results, centers, stats, running, frame):
    """The geometry's centroid update from the reduced statistics, empty clusters relocated
    (``update_from_sums``, see the module doc)."""
    import dask

    sums = stats["sums"].to(centers.dtype)
    weight = stats["weight"].to(centers.dtype)
    farthest = Farthest(stats["far_d"], stats["far_x"], stats["far_w"], stats["far_l"])

    def normal(v):  # the blockwise normal operator of a least-squares update
        parts = [dask.delayed(_normal_block, pure=False)(w, r, v.cpu().numpy(), list(running),
                                                         frame)
                 for w, r in zip(blocks.w, results)]
        return _tree(parts, _add).compute().to(v.dtype)

    return geometry.update_from_sums(sums, weight, centers, stats["cluster_weight"],
                                     farthest, normal)


class _PassStats:
    """The reduced statistics of a pass, for :func:`skxclust._lloyd.lloyd_iterations`."""

    def __init__(self, stats):
        self.stats = stats

    def select(self, keep):
        return _PassStats({k: v[keep] for k, v in self.stats.items()})


def _moments(blocks, frame):
    import dask

    parts = [dask.delayed(_moments_block)(x, w, frame) for x, w in zip(blocks.x, blocks.w)]
    stats = _tree(parts, _merge_moments).compute()
    if not stats["finite"]:
        raise ValueError("Input X contains NaN or infinity.")
    return stats


def _init_sample(X, generator, n_rows: int):
    """Sorted indices of up to ``n_rows`` rows drawn without replacement (all if fewer)."""
    n = X.shape[0]
    if n <= n_rows:
        return np.arange(n)
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    return np.sort(np.random.default_rng(seed).choice(n, n_rows, replace=False))


def _initial_centers(seeding, X, sw_np, frame, shift, n_clusters: int):
    """Seeds (R, K, D) in the fit frame: the ``init`` array, or the estimator's seeding on
    up to :data:`INIT_SAMPLE` rows drawn uniformly (all rows when there are no more)."""
    seeds = seeding(shift.shape[0], frame.dtype)
    if seeds.init_array is not None:
        return (torch.as_tensor(seeds.init_array) - shift)[None]
    rows = _init_sample(X, seeds.generators[0], max(INIT_SAMPLE, 3 * n_clusters))
    Xs, sws = frame.tensors(X[rows].compute(), sw_np[rows])
    return seeds(Xs, sws, shift.to(Xs.device))


def _finish(X, blocks, results, restart, centers, frame, statistics, rows):
    """The labels of the kept restart and the statistics, in one compute: on the ``rows``
    of X, or summed over the blocks when ``rows`` is None. Returns (labels, statistics)."""
    import dask

    parts = [dask.delayed(_labels_block)(r, restart) for r in results]
    if rows is None:
        c = centers.cpu().numpy()
        stats = _tree([dask.delayed(_statistics_block)(x, r, restart, c, frame, statistics)
                       for x, r in zip(blocks.x, results)], _add)
        *parts, stats = dask.compute(*parts, stats)
        return np.concatenate(parts), stats
    *parts, x_rows = dask.compute(*parts, X[rows])
    labels = np.concatenate(parts)
    Xr, _ = frame.tensors(x_rows)
    stats = statistics(Xr, torch.as_tensor(labels[rows], device=Xr.device),
                       centers.to(Xr.device), frame.geometry())
    return labels, stats


def _prepare(X, sw_np, frame, tol: float):
    """The blocks and the moments pass: (blocks, frame with its shift, shift, tol)."""
    import dask.array as da

    n_samples = X.shape[0]
    blocks = _Blocks(X, da.from_array(sw_np, chunks=(X.chunks[0],)).persist())
    moments = _moments(blocks, frame)
    torch_dtype = torch.float32 if frame.dtype == np.float32 else torch.float64
    shift = (moments["wx"] / moments["wsum"]).to(torch_dtype)
    if not frame.geometry().translation_invariant:
        shift = torch.zeros_like(shift)
    check_magnitude(torch.stack([moments["hi"] - shift, moments["lo"] - shift]))
    tol = scaled_tol(tol, n_samples, lambda: moments["m2"] / n_samples)
    return blocks, frame.with_shift(shift.numpy()), shift, tol


def fit_blockwise(X, sample_weight: np.ndarray, *, n_clusters: int, embed, make_geometry,
                  seeding, statistics, statistics_rows, device, max_iter: int, tol: float,
                  verbose: int = 0) -> FitResult:
    """Blockwise Lloyd passes over a validated dask X (see the module docstring).

    Same results as the in-memory fit for the same initial centroids (an ``init`` array,
    or data of at most :data:`INIT_SAMPLE` rows), up to the order of floating-point sums,
    where the in-memory fit has no refiner (ST K-means: ``split_merge_moves=0``).

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features)
        Validated: known row chunks, one column chunk, a real dtype.
    sample_weight : ndarray of shape (n_samples,)
        Validated weights, in the float dtype of the fit.
    n_clusters : int
    embed : callable ``Tensor (n, n_features) -> Tensor (n, D)``
        The estimator's map to the clustered space (picklable: it runs on the workers).
    make_geometry : callable ``() -> Geometry``
        Builds the fit's geometry (picklable).
    seeding : callable ``(D, dtype) -> Seeding``
        The estimator's seeding for the clustered space (run on the client).
    statistics : callable ``(X, labels, centers, geometry) -> dict``
        Additive statistics of rows for the estimator's extra fitted attributes.
    statistics_rows : ndarray of int or None
        Rows ``statistics`` reads (None: all, summed over the blocks).
    device : str or torch.device
        The estimator's ``device`` parameter.
    max_iter : int
    tol : float
        Relative tolerance (scaled here by the mean column variance).
    verbose : int, default=0

    Returns
    -------
    FitResult
        The restart with the lowest inertia; centroids in the input frame.
    """
    frame = _Frame(embed, make_geometry, device, sample_weight.dtype)
    blocks, frame, shift, tol = _prepare(X, sample_weight, frame, tol)
    geometry = frame.geometry()
    centers = _initial_centers(seeding, X, sample_weight, frame, shift,
                               n_clusters).to("cpu", shift.dtype)
    results, stats = _lloyd_pass(blocks, None, centers, list(range(centers.shape[0])), frame)
    inertia = stats["inertia"].clone()
    latest = [results]  # every restart's labels and states after the last pass

    def step(current, state, running):
        rows = running.tolist()
        new = _update(geometry, blocks, latest[0], current, state.stats, rows, frame)
        latest[0], stats = _lloyd_pass(blocks, latest[0], new, rows, frame)
        inertia[running] = stats["inertia"]
        return new, _PassStats(stats), stats["changed"] == 0, stats["inertia"]

    n_iter = lloyd_iterations(centers, _PassStats(stats), step, max_iter, tol, verbose)
    best = best_index(inertia)
    labels, stats = _finish(X, blocks, latest[0], best, centers[best], frame, statistics,
                            statistics_rows)
    return FitResult((centers[best] + shift).numpy(), labels, float(inertia[best]),
                     int(n_iter[best]), stats, shift.numpy())
