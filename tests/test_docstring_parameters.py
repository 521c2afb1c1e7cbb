"""Every public callable's numpydoc "Parameters" section names its signature's parameters,
all of them and in their order (a docstring that documents a parameter the function does
not have, or lists them in another order, misleads the reader of the API reference); the
estimators' "Attributes" sections name exactly the attributes a fit sets."""

import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest

import skxclust
import skxclust.nn
from skxclust import ExplainableKMeans, SpatialTransformerKMeans

PACKAGES = (skxclust, skxclust.nn)


def section_names(doc: str | None, title: str = "Parameters") -> list[str] | None:
    """The names a numpydoc section (``title``: "Parameters", "Attributes") lists, in
    order (``a, b : type`` gives two); None where the docstring has no such section."""
    if not doc:
        return None
    lines = inspect.cleandoc(doc).splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() != title or set(lines[i + 1].strip()) != {"-"}:
            continue
        names, indent, body = [], len(line) - len(line.lstrip()), lines[i + 2:]
        for j, entry in enumerate(body):
            if not entry.strip():
                continue
            depth = len(entry) - len(entry.lstrip())
            if depth < indent:
                break
            if depth > indent:
                continue  # a description
            following = body[j + 1].strip() if j + 1 < len(body) else ""
            if following and set(following) == {"-"}:
                break  # the next section's title
            match = re.match(r"\s*([\w*, ]+?)\s*(:|$)", entry)
            if match:
                names += [name.strip().lstrip("*") for name in match.group(1).split(",")]
        return names
    return None


def signature_parameters(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters
            if name not in ("self", "cls")]


def public_callables():
    """(qualified name, callable, docstring) of every name in a module's ``__all__`` in
    skxclust and skxclust.nn: functions, classes (their ``__init__`` against the class
    docstring) and the public methods the classes define."""
    modules = list(PACKAGES) + [importlib.import_module(f"{package.__name__}.{info.name}")
                                for package in PACKAGES
                                for info in pkgutil.iter_modules(package.__path__)]
    seen = set()
    for module in modules:
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            entries = []
            if inspect.isclass(obj):
                entries.append((f"{obj.__module__}.{name}", obj.__init__, obj.__doc__))
                entries += [(f"{obj.__module__}.{name}.{method}", member, member.__doc__)
                            for method, member in vars(obj).items()
                            if not method.startswith("_") and inspect.isfunction(member)]
            elif callable(obj):
                entries.append((f"{getattr(obj, '__module__', module.__name__)}.{name}",
                                obj, obj.__doc__))
            for qualified, function, doc in entries:
                if qualified not in seen and section_names(doc) is not None:
                    seen.add(qualified)
                    yield qualified, function, doc


CASES = sorted(public_callables(), key=lambda case: case[0])


@pytest.mark.parametrize("qualified, function, doc", CASES, ids=[c[0] for c in CASES])
def test_parameters_section_lists_the_signature_in_order(qualified, function, doc):
    assert section_names(doc) == signature_parameters(function)


@pytest.mark.parametrize("name", [
    "skxclust._spatial.SpatialTransformerKMeans", "skxclust._explainable.ExplainableKMeans",
    "skxclust._explainable.ExplainableKMeans.explain", "skxclust.nn.warp_solver.fit_warps",
    "skxclust.nn.appearance.intensity_rows", "skxclust._progress.track",
    "skxclust._pipeline.explain_pipeline"])
def test_the_estimators_and_solvers_are_among_the_checked(name):
    assert name in {case[0] for case in CASES}


def _documented_in_another_order(a, b):
    """Two parameters.

    Parameters
    ----------
    b : int
        Second.
    a : int
        First.

    Returns
    -------
    int
    """
    return a + b


def _documented_with_a_name_it_lacks(a, b):
    """Two parameters.

    Parameters
    ----------
    a, c : int
        Grouped.
    """
    return a + b


@pytest.mark.parametrize("function", [_documented_in_another_order,
                                      _documented_with_a_name_it_lacks])
def test_the_check_sees_a_swapped_order_and_a_name_the_signature_lacks(function):
    assert section_names(function.__doc__) != signature_parameters(function)
    assert section_names("No sections here.") is None


@pytest.mark.parametrize("estimator", [
    ExplainableKMeans(3, random_state=0),
    SpatialTransformerKMeans(3, n_steps=2, max_iter=1, random_state=0)],
    ids=["explainable", "spatial"])
def test_attributes_section_names_exactly_what_fit_sets(estimator):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((40, 16)), columns=[f"pixel{i}" for i in range(16)])
    fitted = estimator.fit(X)  # a DataFrame: feature_names_in_ is set too
    set_by_fit = {name for name in vars(fitted) if name.endswith("_")
                  and not name.startswith("_")}
    assert set(section_names(type(fitted).__doc__, "Attributes")) == set_by_fit
