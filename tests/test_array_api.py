"""scikit-learn's array API dispatch, in a child process with ``SCIPY_ARRAY_API=1``.

scipy reads ``SCIPY_ARRAY_API`` once, when it is imported, and scikit-learn refuses
``array_api_dispatch=True`` without it. Setting it for this session would switch scipy into
its array API mode for every other test, so the dispatch tests (``tests/_array_api_cases.py``:
scikit-learn's array-API estimator checks, torch and array-api-strict inputs, the
PCA -> ExplainableKMeans pipeline, refusals, pickling) run in a child pytest that sets it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).with_name("_array_api_cases.py")


def test_array_api_dispatch_cases_pass_with_scipy_array_api_set():
    pytest.importorskip("array_api_strict")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(CASES)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    report = result.stdout[-8000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "error" not in summary, report
    # nothing may be skipped for want of the environment or of array-api-strict
    assert "SCIPY_ARRAY_API" not in result.stdout, report
    assert "array_api_strict is not installed" not in result.stdout, report
