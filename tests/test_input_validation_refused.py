"""Every malformed input is refused clearly by both estimators, and nothing is changed.

The case list (``CASES``, in ``tests/_input_validation_cases.py``) drives the tests and the
table of refused inputs in ``doc/user_guide/refused_inputs.rst``. For every (case,
estimator, method) the tests assert the exception type, that the message names the problem
(and, for parameters, the parameter and its value), that ``__dict__`` is deep-equal before
and after the failed call, and that the arguments (X, sample_weight, target) were not
modified.

After changing a message or a case, rewrite the table with::

    python tests/test_input_validation_refused.py

``partial_fit`` is run with the fitting methods, on a fitted estimator (a continuation
step), except for chunks smaller than ``n_clusters``, which it accepts once seeded.
"""

from __future__ import annotations

import copy
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
from _input_validation_cases import (
    ALL,
    BOTH,
    CASES,
    CLASS_NAMES,
    DATA_CASES,
    ESTIMATORS,
    FIT,
    FULL_FIT,
    INFER,
    PARAM_CASES,
    WEIGHT_CASES,
    Case,
    X,
    assert_same,
    combinations,
    fitted,
    has_method,
)
from sklearn.utils._param_validation import InvalidParameterError

TABLE = Path(__file__).resolve().parents[1] / "doc" / "user_guide" / "refused_inputs.rst"
BEGIN, END = ".. BEGIN GENERATED TABLE", ".. END GENERATED TABLE"


def call(est, method, data, kwargs):
    return getattr(est, method)(data, **kwargs)


def run_case(case: Case, estimator: str, method: str):
    """Call ``method`` with the bad input on a copy of a fitted estimator; return
    (estimator, state before, X, kwargs, copies of X and kwargs, raised exception info)."""
    est = copy.deepcopy(fitted(estimator, case.fitted))
    if case.params:
        est.set_params(**case.params)
    before = copy.deepcopy(est.__dict__)
    data, kwargs = case.data(), case.kwargs()
    data_copy, kwargs_copy = copy.deepcopy(data), copy.deepcopy(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(case.exc, match=case.match) as info:
            call(est, method, data, kwargs)
    return est, before, data, kwargs, data_copy, kwargs_copy, info


def check_refusal(case: Case, estimator: str, method: str) -> None:
    """The refusal of one (case, estimator, method): exception, message, nothing changed."""
    est, before, data, kwargs, data_copy, kwargs_copy, info = run_case(case, estimator, method)
    message = str(info.value)
    for name in case.names:
        assert name in message, f"{name!r} not named in: {message}"
    assert_same(before, est.__dict__, "estimator.__dict__")
    assert_same(data_copy, data, "X")
    assert_same(kwargs_copy, kwargs, "arguments")


PAIRS = [(case, estimator) for case in CASES for estimator in case.estimators]


@pytest.mark.parametrize("case, estimator", [pytest.param(c, e, id=f"{c.id}-{e}")
                                             for c, e in PAIRS])
def test_bad_input_is_refused_clearly_and_changes_nothing(case, estimator):
    # One test item per (case, estimator), every method inside it: pytest's per-item
    # overhead would otherwise dominate. Failures of all methods are reported together.
    failures = []
    for method in case.methods:
        if has_method(estimator, method):
            try:
                check_refusal(case, estimator, method)
            except (AssertionError, pytest.fail.Exception) as exc:
                failures.append(f"{method}: {exc}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("estimator", BOTH)
@pytest.mark.parametrize("method", ["fit_predict", "fit_transform"])
def test_fit_predict_and_fit_transform_refuse_bad_parameters_like_fit(method, estimator):
    for case in PARAM_CASES:
        if estimator in case.estimators:
            est, before, *_ = run_case(case, estimator, method)
            assert_same(before, est.__dict__, f"{case.id}: estimator.__dict__")


FIT_DATA_CASES = [c for c in DATA_CASES + WEIGHT_CASES if "fit" in c.methods]


@pytest.mark.parametrize(
    "case, estimator",
    [(c, e) for c in FIT_DATA_CASES for e in BOTH if e in c.estimators],
    ids=[f"{c.id}-{e}" for c in FIT_DATA_CASES for e in BOTH if e in c.estimators],
)
def test_failed_fit_of_an_unfitted_estimator_leaves_no_attribute(case, estimator):
    est = ESTIMATORS[estimator]().set_params(**case.params)
    before = copy.deepcopy(est.__dict__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(case.exc, match=case.match):
            est.fit(case.data(), **case.kwargs())
    assert_same(before, est.__dict__, "estimator.__dict__")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("estimator", BOTH)
def test_cuda_requested_without_cuda_is_refused_naming_the_device(estimator):
    est = copy.deepcopy(fitted(estimator)).set_params(device="cuda")
    before = copy.deepcopy(est.__dict__)
    with pytest.raises(ValueError, match=r"device='cuda' was requested but CUDA is not"):
        est.fit(X)
    assert_same(before, est.__dict__, "estimator.__dict__")

# -- the documentation table ---------------------------------------------------------------------
def _message(case: Case) -> tuple[str, str, str]:
    """(estimator, method, first line of the message) of the first combination of a case."""
    estimator, method = next((e, m) for c, e, m in combinations() if c is case)
    *_, info = run_case(case, estimator, method)
    first = str(info.value).splitlines()[0].strip()
    for name in CLASS_NAMES.values():
        first = first.replace(name, "<Estimator>")
    # scikit-learn prints sets of options in hash order: sort them for a stable table
    first = re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m[1].split(", "))) + "}",
                   first)
    return estimator, method, first


def _methods(case: Case) -> str:
    if case.methods == ALL:
        return "all"
    if case.methods == INFER:
        return "all inference"
    if case.methods == FULL_FIT + INFER:
        return "all but partial_fit"
    if case.params:  # also run through fit_predict, fit_transform and partial_fit
        return ", ".join(FIT)
    return ", ".join(case.methods)


def _estimators(case: Case) -> str:
    return "both" if case.estimators == BOTH else CLASS_NAMES[case.estimators[0]]


def _literal(text: str) -> str:
    return "``" + text.replace("``", "` `") + "``" if text else ""


def render_table() -> str:
    """The RST list-table of every case, messages as actually raised."""
    lines = [BEGIN, "", ".. list-table::", "   :header-rows: 1", "   :widths: 28 12 14 14 32",
             "", "   * - Input", "     - Estimators", "     - Methods", "     - Exception",
             "     - Message (first line)"]
    for case in CASES:
        _, _, message = _message(case)
        exc = case.exc.__name__
        if case.exc is InvalidParameterError:
            exc += " (ValueError, TypeError)"
        lines += [f"   * - {case.what}", f"     - {_estimators(case)}",
                  f"     - {_methods(case)}", f"     - {exc}", f"     - {_literal(message)}"]
    lines += ["", END]
    return "\n".join(lines)


def _table_in_doc() -> str:
    text = TABLE.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return text[start:stop]


def test_documentation_table_lists_every_case_with_the_message_raised():
    rendered = render_table()
    assert _table_in_doc() == rendered, (
        "doc/user_guide/refused_inputs.rst is out of date: run "
        "`python tests/test_input_validation_refused.py` to rewrite its table"
    )


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


if __name__ == "__main__":  # rewrite the table in the documentation
    text = TABLE.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    TABLE.write_text(text[:start] + render_table() + text[stop:])
    n_combos = sum(1 for _ in combinations())
    print(f"{len(CASES)} refused inputs, {n_combos} (input, estimator, method) combinations",
          file=sys.stderr)
