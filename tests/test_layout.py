"""The shape of the house: one fit lifecycle, one geometry contract, one-way imports.

These tests read the package's source (``ast``) and drive its private fit machinery
directly, so that the layout the README and ``doc/layout.rst`` describe stays true.
"""

import ast
import inspect
import pathlib

import numpy as np
import pytest
import torch

import skxclust
from skxclust import ExplainableKMeans, SpatialTransformerKMeans
from skxclust._base import BaseTorchKMeans
from skxclust._dask_fit import fit_blockwise
from skxclust._euclidean import EuclideanGeometry
from skxclust._geometry import Assignment, Geometry
from skxclust._lloyd import best_restart, lloyd
from skxclust._seeding import Seeding
from skxclust._streaming import mini_batch_step
from skxclust._warp_geometry import WarpGeometry

PACKAGE = pathlib.Path(skxclust.__file__).parent
REPO = PACKAGE.parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: pathlib.Path) -> set[str]:
    """The skxclust modules ``path`` imports, at module level or inside functions."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("skxclust"):
                found.add(target)
                # "from . import x" / "from .nn import lrp" name submodules
                for alias in node.names:
                    if f"{target}.{alias.name}" in MODULE_NAMES:
                        found.add(f"{target}.{alias.name}")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("skxclust"))
    found.discard(name)
    return found


MODULE_NAMES = {module_name(p) for p in MODULES}
GRAPH = {module_name(p): imported_modules(p) & MODULE_NAMES for p in MODULES}


def test_no_import_cycle_between_the_package_modules():
    # a package imports its __init__ first: only edges between modules count
    graph = {m: {d for d in deps if d not in ("skxclust", "skxclust.nn")}
             for m, deps in GRAPH.items()}
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for dep in sorted(graph[module]):
            assert state.get(dep) != 1, f"import cycle: {' -> '.join(path + [dep])}"
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("path", [p for p in MODULES if "nn" in p.relative_to(PACKAGE).parts],
                         ids=lambda p: p.name)
def test_nn_imports_neither_scikit_learn_nor_the_estimators(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        assert not any(n.split(".")[0] == "sklearn" for n in names), path
    assert all(dep.startswith("skxclust.nn") for dep in GRAPH[module_name(path)]), path


def test_no_module_keys_a_cache_on_a_tensors_version_counter():
    # issue 21: caches keyed on the private torch.Tensor._version were replaced by values
    # passed explicitly (EuclideanGeometry.prepare / for_rows, Assignment.pairwise)
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in MODULES
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "_version"]
    assert not found, found


# Private attributes read on something other than self / cls / super(): each with why.
ALLOWED_PRIVATE = {
    "_meta",  # a dask array's meta block (sparse blocks are refused)
    "_parameter_constraints",  # scikit-learn's class attribute, extended by subclasses
    "_replace",  # a NamedTuple's documented copy with fields replaced (e.g. LloydFit)
}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reaches_into_another_modules_private_names(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or
                                                 (node.module or "").startswith("skxclust")):
            private = [a.name for a in node.names
                       if a.name.startswith("_") and not a.name.startswith("__")]
            assert not private or node.module is None, (path, node.lineno, private)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and node.attr not in ALLOWED_PRIVATE:
            owner = node.value
            # "recipe": the estimator's own unfitted clone (BaseTorchKMeans._fit_dask)
            ok = (isinstance(owner, ast.Name) and owner.id in ("self", "cls", "recipe")) or \
                (isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super")
            assert ok, f"{path.name}:{node.lineno} reads {ast.unparse(node)}"


@pytest.mark.parametrize("name", ["_streaming.py", "_dask_fit.py"])
def test_streaming_and_dask_fit_never_see_an_estimator(name):
    tree = ast.parse((PACKAGE / name).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    assert not {"estimator", "self_estimator", "est"} & names
    deps = GRAPH[f"skxclust.{name[:-3]}"]
    assert not deps & {"skxclust._base", "skxclust._explainable", "skxclust._spatial"}


def overridden_private_methods(cls) -> set[str]:
    """Private (non-dunder) methods and properties of ``BaseTorchKMeans`` (its MRO included)
    that ``cls`` or one of its mixins replaces."""
    found = set()
    for name in dir(BaseTorchKMeans):
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        base = inspect.getattr_static(BaseTorchKMeans, name)
        if callable(base) or isinstance(base, (property, staticmethod, classmethod)):
            if inspect.getattr_static(cls, name) is not base:
                found.add(name)
    return found


def test_the_estimators_override_at_most_five_private_hooks():
    # issue 21: the estimators overrode 13 private hooks of BaseTorchKMeans; each now
    # states its fit in one FitPlan (_fit_plan), which the base's fit paths run
    hooks = (overridden_private_methods(ExplainableKMeans)
             | overridden_private_methods(SpatialTransformerKMeans))
    assert len(hooks) <= 5, sorted(hooks)


def calls_of(name: str) -> list[str]:
    """``module:line`` of every call of a function or method named ``name`` in the package."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == name:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_one_thread_policy_sets_the_threads_in_at_most_four_places():
    # issue 21: 14 torch_threads(...) settings were spread through the math, each with its
    # own threshold; skxclust/_threads.py now decides, and only it sets the thread count or
    # starts threads (the math states the size of a pass or hands it independent jobs)
    sites = calls_of("torch_threads")
    assert len(sites) <= 4, sites
    for name in ("set_num_threads", "ThreadPoolExecutor"):
        assert all(site.startswith("_threads.py:") for site in calls_of(name)), calls_of(name)


def tolerance_scalings() -> list[str]:
    """``module:line`` of every product of a tolerance (``tol`` or ``1e-4``) with a mean."""
    def is_tol(node):
        return (getattr(node, "id", getattr(node, "attr", None)) == "tol"
                or (isinstance(node, ast.Constant) and node.value == 1e-4))

    def takes_a_mean(node):
        return any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "mean"
                   for n in ast.walk(node))

    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and any(
                    is_tol(a) and takes_a_mean(b)
                    for a, b in ((node.left, node.right), (node.right, node.left))):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_the_tolerance_is_scaled_by_the_data_in_one_place():
    # issue 21: "tol times the mean column variance" was written three times (once with
    # 1e-4 hard-coded); every fit now calls skxclust._lloyd.scaled_tol
    sites = tolerance_scalings()
    assert len(sites) == 1 and sites[0].startswith("_lloyd.py:"), sites


def _fit_drawing() -> str:
    """The code block of doc/layout.rst's "One ST fit, top to bottom"."""
    text = (REPO / "doc" / "layout.rst").read_text()
    section = text.split("One ST fit, top to bottom\n", 1)[1].split("\n---", 1)[0]
    return section.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1]


def test_the_drawing_of_the_fit_names_only_code_that_exists():
    """Every function, method and file the drawing names is in the package: a rename or a
    removed step fails here until doc/layout.rst follows."""
    import re

    drawing = _fit_drawing()
    files = set(re.findall(r"\[([\w/]+)(?:\.py|\.(\w+))\]", drawing))
    assert len(files) >= 6
    for path, name in files:  # [_base.py] or [nn/warp_solver.fit_warps]
        source = (PACKAGE / f"{path}.py").read_text()
        assert not name or f"def {name}(" in source, (path, name)
    steps = re.sub(r"\[[\w/.]+\]", "", drawing)  # the names, without the [file] notes
    names = set(re.findall(r"\b(_?[a-z]+(?:_[a-z]+)+)\b", steps)) - {
        "image_shape_", "noise_variance_", "cluster_centers_", "labels_", "inertia_",
        "n_iter_", "beta_", "n_iter"}
    source = "\n".join(path.read_text() for path in MODULES)
    missing = sorted(n for n in names if not re.search(rf"(def|class) {n}\b|\b{n}=", source))
    assert len(names) >= 10 and not missing, missing
    classes = set(re.findall(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)+)\b", steps))
    assert {"FitPlan", "WarpGeometry", "LloydFit"} <= classes
    assert not [c for c in classes if f"class {c}" not in source]


@pytest.mark.parametrize("path", sorted([*PACKAGE.rglob("*.py"),
                                         *(REPO / "benchmarks").glob("*.py"),
                                         *(REPO / "tests").glob("*.py")]),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_source_files_stay_under_500_lines(path):
    assert len(path.read_text().splitlines()) <= 500


# -- the geometry contract ------------------------------------------------------------------
class ScaledGeometry(Geometry):
    """A geometry written against the contract only: Euclidean distance after scaling
    the features by ``scale``; one restart at a time, closed-form update."""

    def __init__(self, scale):
        self.scale = scale

    def pairwise(self, X, centers):
        return (((X[:, None, :] - centers[None]) * self.scale) ** 2).sum(-1)

    def assign(self, X, centers):
        distances, labels = self.pairwise(X, centers).min(dim=1)
        return Assignment(labels, distances)

    def partial_sums(self, X, centers, assignment, sample_weight):
        sums = X.new_zeros(centers.shape).index_add_(0, assignment.labels,
                                                     X * sample_weight[:, None])
        weight = X.new_zeros(centers.shape[0]).index_add_(0, assignment.labels,
                                                          sample_weight)
        return sums, weight

    @staticmethod
    def centers_from_sums(sums, weight, centers):
        return torch.where(weight[:, None] > 0, sums / weight.clamp_min(1e-300)[:, None],
                           centers)

    def update(self, X, centers, assignment, sample_weight):
        sums, weight = self.partial_sums(X, centers, assignment, sample_weight)
        return self.centers_from_sums(sums, weight, centers), weight


def blobs(n=120, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=5.0, size=(3, 4))
    return (means[rng.integers(0, 3, n)] + rng.normal(size=(n, 4))).astype(np.float64)


@pytest.mark.parametrize("geometry", [EuclideanGeometry, WarpGeometry])
def test_both_geometries_implement_the_contract(geometry):
    assert issubclass(geometry, Geometry)
    for method in ("assign", "pairwise", "update", "partial_sums", "centers_from_sums"):
        assert getattr(geometry, method) is not getattr(Geometry, method), method
    # the least-squares update is the geometry's own: it has a normal operator
    labels, sw = torch.zeros(2, dtype=torch.long), torch.ones(2)
    assert EuclideanGeometry().normal_operator(labels, None, sw) is None
    assert WarpGeometry.normal_operator is not Geometry.normal_operator


def boolean_flags(cls) -> set[str]:
    """The boolean class attributes of ``cls`` and its bases."""
    return {name for klass in cls.__mro__ for name, value in vars(klass).items()
            if isinstance(value, bool)}


@pytest.mark.parametrize("geometry", [Geometry, EuclideanGeometry, WarpGeometry])
def test_the_geometry_contract_has_at_most_one_boolean_flag(geometry):
    # behaviour is the geometry's methods (update, relocate, restart_runs, ...), not flags
    # that the fits read to choose a code path
    assert len(boolean_flags(geometry)) <= 1, boolean_flags(geometry)


def test_a_geometry_written_against_the_contract_runs_every_fit():
    X = torch.from_numpy(blobs())
    sw = torch.ones(X.shape[0], dtype=X.dtype)
    scale = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=X.dtype)
    geometry = ScaledGeometry(scale)
    init = X[[0, 1, 2]].clone()
    labels, inertia, centers, *_ = best_restart(lloyd(X, init[None], geometry, sw,
                                                     max_iter=20, tol=0.0))
    assert float(inertia) == pytest.approx(float(geometry.assign(X, centers).distances.sum()))
    # one mini-batch step on all rows from the converged centroids keeps them
    stepped, counts = mini_batch_step(geometry, X, centers, torch.zeros(3, dtype=torch.float64),
                                      sw)
    torch.testing.assert_close(stepped, centers)
    np.testing.assert_array_equal(np.sort(counts.numpy()),
                                  np.sort(np.bincount(labels.numpy(), minlength=3)))


def test_fit_blockwise_takes_arrays_and_callables_not_an_estimator():
    da = pytest.importorskip("dask.array")
    X = blobs()
    sw = np.ones(X.shape[0])
    init = X[[0, 1, 2]]

    def seeding(n_features, dtype):
        return Seeding(lambda *args: None, init, [torch.Generator().manual_seed(0)])

    def statistics(rows, labels, centers, geometry):
        return {"rows": int(rows.shape[0])}

    result = fit_blockwise(
        da.from_array(X, chunks=40), sw, n_clusters=3, embed=lambda x: x,
        make_geometry=EuclideanGeometry, seeding=seeding, statistics=statistics,
        statistics_rows=None, device="cpu", max_iter=50, tol=0.0)
    Xt = torch.from_numpy(X)
    mean = Xt.mean(dim=0)
    seeds = torch.from_numpy(init)[None] - mean
    labels, _, centers, *_ = best_restart(lloyd(Xt - mean, seeds, EuclideanGeometry(),
                                               torch.from_numpy(sw), 50, 0.0))
    np.testing.assert_array_equal(result.labels, labels.numpy())
    np.testing.assert_allclose(result.centers, (centers + mean).numpy(), rtol=1e-12)
    assert result.stats == {"rows": 120}  # summed over the 3 blocks


@pytest.mark.parametrize("image_shape", [(3, 3), (0, 64), (8, 8, 1), (8.0, 8.0)])
def test_image_shapes_are_resolved_in_one_place(image_shape):
    pytest.importorskip("matplotlib")
    from skxclust.plotting import plot_centroids

    X = np.random.default_rng(0).random((10, 64))
    with pytest.raises(ValueError, match="image_shape") as fit_error:
        SpatialTransformerKMeans(2, image_shape=image_shape, n_steps=0).fit(X)
    fitted = ExplainableKMeans(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="image_shape") as plot_error:
        plot_centroids(fitted, image_shape=image_shape)
    assert str(fit_error.value) == str(plot_error.value)


# -- one lifecycle: every way to fit behaves alike ------------------------------------------
@pytest.mark.parametrize("container", ["numpy", "dask"])
def test_fit_warnings_point_at_the_callers_line_however_deep_they_arise(container):
    X = np.zeros((20, 3))
    X[:10] = 1.0
    if container == "dask":
        X = pytest.importorskip("dask.array").from_array(X, chunks=10)
    init = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    with pytest.warns(Warning) as record:
        ExplainableKMeans(4, random_state=0).fit(X)
        ExplainableKMeans(2, init=init, n_init=3).fit(X)
    categories = {w.category.__name__ for w in record}
    assert categories == {"ConvergenceWarning", "RuntimeWarning"}
    assert {w.filename for w in record} == {__file__}
