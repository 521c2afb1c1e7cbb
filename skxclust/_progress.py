"""Progress bars for long work (tqdm's notebook-aware ``tqdm.auto`` bars), and their switch.

One setting, ``progress`` (:func:`set_config`, :func:`config_context`, or the environment
variable ``SKXCLUST_PROGRESS`` read at import):

``"auto"`` (default)
    A bar appears once a piece of work has run for :data:`AUTO_DELAY` seconds, in a Jupyter
    kernel or when standard error is a terminal; never in a thread other than the main
    one (joblib's threading backend, dask workers), in a child process (joblib/loky
    workers, multiprocessing), when ``verbose > 0`` (the estimator prints its own lines
    then), or when standard error is redirected (logs, CI, pytest's capture).
``True``
    At once, in the main thread (also where ``"auto"`` would stay silent: with
    ``verbose``, in child processes, with standard error redirected).
``False``
    Never.

Bars are opened by the loops of the package: one per Lloyd fit (one unit per iteration),
one per row-block pass of inference with more than one block (one unit per row), and one
per warp pass outside both (e.g. the merge initialisation's warped step and the affine
choice's evidence). A
loop running inside another's step does not open a second bar: it fills the step of the
enclosing bar (:func:`progress` and :func:`track` nest), so a fit shows one bar that moves
within each iteration too. Bars are cleared when their work ends (``leave=False``).

For code in the package::

    with progress(max_iter, desc="fit", unit="iteration", verbose=verbose) as bar:
        for it in range(max_iter):
            with bar.step():          # nested progress/track calls fill this step
                ...
            bar.note(f"iteration {it + 1}/{max_iter}")

    for chunk in track(chunks, desc="align", unit="rows", sizes=rows_per_chunk):
        ...                           # a bar of its own, or a share of the enclosing step
"""

from __future__ import annotations

import contextlib
import contextvars
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = [
    "AUTO_DELAY",
    "Progress",
    "config_context",
    "get_config",
    "progress",
    "progress_enabled",
    "set_config",
    "track",
]

#: Seconds a piece of work runs before its bar appears with ``progress="auto"``.
AUTO_DELAY = 2.0

_ENV = "SKXCLUST_PROGRESS"
_WORDS: dict[str, bool | str] = {"auto": "auto", "1": True, "true": True, "on": True, "yes": True,
          "0": False, "false": False, "off": False, "no": False}


def _check_progress(value: Any, name: str = "progress") -> bool | str:
    if value is True or value is False or value == "auto":
        return value
    raise ValueError(f"{name} must be True, False or 'auto'; got {value!r}.")


def _from_environment() -> bool | str:
    raw = os.environ.get(_ENV, "auto").strip().lower()
    if raw not in _WORDS:
        raise ValueError(f"The environment variable {_ENV} must be one of "
                         f"{', '.join(sorted(_WORDS))}; got {raw!r}.")
    return _WORDS[raw]


_CONFIG: dict[str, Any] = {"progress": _from_environment()}


def set_config(*, progress: bool | str | None = None) -> None:
    """Set package-wide options of skxclust.

    Parameters
    ----------
    progress : {"auto", True, False}, default=None
        Progress bars on long work (fits, inference passes over many row blocks).
        "auto": after two seconds of work, in a notebook or a terminal only, never in
        worker threads or processes or when ``verbose > 0``; True: at once, wherever the
        main thread runs; False: never.
        None leaves the setting unchanged. The initial value comes from the environment
        variable ``SKXCLUST_PROGRESS`` (``auto``, ``1``/``on``, ``0``/``off``), "auto" when
        unset.

    Examples
    --------
    >>> import skxclust
    >>> skxclust.set_config(progress=False)
    >>> skxclust.get_config()["progress"]
    False
    >>> skxclust.set_config(progress="auto")
    """
    if progress is not None:
        _CONFIG["progress"] = _check_progress(progress)


def get_config() -> dict:
    """The current package-wide options (a copy), see :func:`set_config`.

    Returns
    -------
    dict
        ``{"progress": "auto" | True | False}``.
    """
    return dict(_CONFIG)


@contextlib.contextmanager
def config_context(*, progress: bool | str | None = None) -> Iterator[None]:
    """Package-wide options for the duration of a ``with`` block, then as they were.

    Parameters
    ----------
    progress : {"auto", True, False}, default=None
        See :func:`set_config`.

    Examples
    --------
    >>> import numpy as np
    >>> from skxclust import ExplainableKMeans, config_context
    >>> with config_context(progress=False):  # no bar, however long the fit
    ...     km = ExplainableKMeans(2, random_state=0).fit(np.eye(4))
    """
    saved = get_config()
    set_config(progress=progress)
    try:
        yield
    finally:
        _CONFIG.update(saved)


def _in_jupyter() -> bool:
    """True inside a Jupyter kernel (notebook, lab, VS Code), where tqdm.auto draws widgets
    (an imported ipykernel alone is not a kernel: its shell must be running)."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    shell = ipython.get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def progress_enabled(verbose: int = 0) -> bool:
    """Whether a new bar would be drawn here and now (see the module docstring).

    Parameters
    ----------
    verbose : int, default=0
        The caller's verbosity; with ``progress="auto"``, ``verbose > 0`` means no bar.

    Returns
    -------
    bool
    """
    mode = _CONFIG["progress"]
    if threading.current_thread() is not threading.main_thread():
        return False  # bars of concurrent threads would interleave
    if isinstance(mode, bool):
        return mode
    if verbose:
        return False
    if multiprocessing.parent_process() is not None:
        return False
    if _in_jupyter():
        return True
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _new_bar(total: float, desc: str, unit: str):
    """A tqdm.auto bar (a widget in Jupyter, text on standard error otherwise)."""
    import warnings

    with warnings.catch_warnings():  # tqdm's notes on its notebook mode and ipywidgets
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    delay = AUTO_DELAY if _CONFIG["progress"] == "auto" else 0.0
    return tqdm(total=total, desc=desc, unit=unit, leave=False, delay=delay,
                dynamic_ncols=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]")


class Progress:
    """A span of a bar: ``total`` units of the caller mapped onto ``width`` bar units.

    Made by :func:`progress`; with no bar (disabled, or nothing to show) every method is a
    no-op, so callers never test for it.
    """

    __slots__ = ("_bar", "_origin", "_scale", "_done", "total")

    def __init__(self, bar, origin: float, width: float, total: float):
        self._bar = bar
        self._origin = origin
        self.total = float(total)
        self._scale = width / self.total if self.total > 0 else 0.0
        self._done = 0.0

    def _move_to(self, done: float) -> None:
        self._done = min(max(done, self._done), self.total)
        if self._bar is not None:
            target = self._origin + self._done * self._scale
            if target > self._bar.n:
                self._bar.update(target - self._bar.n)

    def advance(self, units: float = 1.0) -> None:
        """Mark ``units`` more of the work as done."""
        self._move_to(self._done + units)

    @contextlib.contextmanager
    def step(self, units: float = 1.0) -> Iterator[None]:
        """The body is ``units`` of the work: progress opened inside it fills that share,
        and the bar stands at its end afterwards."""
        if self._bar is None:
            yield
            return
        outer = _SCOPE.get()
        _SCOPE.set((self._bar, self._origin + self._done * self._scale, units * self._scale))
        try:
            yield
        finally:
            _SCOPE.set(outer)
            self.advance(units)

    def note(self, text: str) -> None:
        """Show ``text`` after the bar (e.g. "iteration 3/20"); only on a bar of its own."""
        if self._bar is not None and self._origin == 0.0 and self._scale == 1.0:
            self._bar.set_postfix_str(text, refresh=False)


# The innermost open step: (bar, its start, its width in bar units), or None.
_SCOPE: contextvars.ContextVar = contextvars.ContextVar("skxclust_progress", default=None)


@contextlib.contextmanager
def progress(total: float, *, desc: str, unit: str = "it", verbose: int = 0,
             new_bar: bool = True) -> Iterator[Progress]:
    """Progress over ``total`` units of work.

    Inside a :meth:`Progress.step` of an open bar (in this thread), the units fill that
    step; otherwise a new bar is drawn when :func:`progress_enabled` and ``new_bar``.

    Parameters
    ----------
    total : float
        Units of work (iterations, rows).
    desc : str
        Label of a new bar.
    unit : str, default="it"
        Unit shown by a new bar.
    verbose : int, default=0
        The caller's verbosity (``verbose > 0``: no new bar with ``progress="auto"``).
    new_bar : bool, default=True
        False: only fill an enclosing step, never draw a bar of its own (e.g. work
        too short or too coarse to show).

    Yields
    ------
    Progress
    """
    scope = _SCOPE.get()
    # A step of a bar that is closed (its loop died in an exception and its generator
    # still waits to be collected) no longer counts.
    if scope is not None and not scope[0].disable:
        bar, origin, width = scope
        yield Progress(bar, origin, width, total)
        return
    if not (new_bar and total > 0 and progress_enabled(verbose)):
        yield Progress(None, 0.0, 1.0, total)
        return
    bar = _new_bar(total, desc, unit)
    try:
        yield Progress(bar, 0.0, float(total), total)
    finally:
        bar.close()


def track(items: Iterable, *, desc: str, unit: str = "it", sizes: Sequence[float] | None = None,
          verbose: int = 0, min_items: int = 2) -> Iterator:
    """Yield ``items``, each a :meth:`Progress.step` of a :func:`progress` over them.

    Parameters
    ----------
    items : iterable
        With a length (a list, a range).
    desc, unit
        As in :func:`progress`.
    sizes : sequence of float, default=None
        Units of each item (e.g. rows per block); 1 each when None.
    verbose
        As in :func:`progress`.
    min_items : int, default=2
        Fewer items never draw a bar of their own (nothing to show between start and
        end); they still fill an enclosing step.

    Yields
    ------
    object
        The items, in order; the work the caller does with one counts as its step.
    """
    items = list(items) if not isinstance(items, Sequence) else items
    sizes = [1.0] * len(items) if sizes is None else sizes
    with progress(float(sum(sizes)), desc=desc, unit=unit, verbose=verbose,
                  new_bar=len(items) >= min_items) as bar:
        for item, size in zip(items, sizes):
            with bar.step(size):
                yield item
