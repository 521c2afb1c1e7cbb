"""Run every benchmark of the project and regenerate the README's results section.

``python -m benchmarks [--quick] [--only NAME,...] [--output-dir DIR] [--readme | --no-readme]``

Benchmarks are found, not registered: every ``benchmarks/bench_<name>.py`` that defines
``build_parser`` and ``main`` (see :mod:`benchmarks._common`) is benchmark ``<name>``, run
as ``python benchmarks/bench_<name>.py [--quick] --output DIR/<name>.json`` in its own
process (fresh memory and thread pools, and a failing benchmark does not stop the others).

A full run writes into ``benchmarks/results/`` and then rewrites the README section
between the markers from every JSON there (:mod:`benchmarks.report`). ``--quick`` (small
data, few repeats, about two minutes on two cores) writes into
``benchmarks/results/quick/`` (git-ignored) and prints the report instead of writing the
README, so quick numbers never replace committed ones.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import report
from benchmarks._common import BENCH_DIR, QUICK_DIR, RESULTS_DIR, ROOT, display_path

PREFIX = "bench_"
ENTRY_POINTS = ("build_parser", "main")


def _defines(path: Path) -> set[str]:
    """Top-level function names of a module, read without importing it."""
    tree = ast.parse(path.read_text(), filename=path.name)
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def discover(bench_dir: Path = BENCH_DIR) -> dict[str, Path]:
    """Every benchmark module in ``bench_dir``, by name.

    Parameters
    ----------
    bench_dir : pathlib.Path, default=the ``benchmarks`` folder
        Where to look for ``bench_<name>.py``.

    Returns
    -------
    dict of str to pathlib.Path
        ``{name: path}``, sorted by name.

    Raises
    ------
    ValueError
        If a ``bench_*.py`` module lacks ``build_parser`` or ``main``: it would be skipped
        silently otherwise.
    """
    found = {}
    for path in sorted(Path(bench_dir).glob(f"{PREFIX}*.py")):
        missing = [name for name in ENTRY_POINTS if name not in _defines(path)]
        if missing:
            raise ValueError(f"{path.name} is not a runnable benchmark: it does not define "
                             f"{', '.join(missing)} (see benchmarks/_common.py)")
        found[path.stem[len(PREFIX):]] = path
    return found


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m benchmarks``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small data and few repeats (about 2 minutes); results go to "
                             "benchmarks/results/quick/ and the README is left alone")
    parser.add_argument("--only", action="append", default=None, metavar="NAME[,NAME...]",
                        help="run only these benchmarks (comma-separated, repeatable)")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the JSON files go (default: benchmarks/results, "
                             "benchmarks/results/quick with --quick)")
    readme = parser.add_mutually_exclusive_group()
    readme.add_argument("--readme", dest="readme", action="store_true", default=None,
                        help="rewrite the README's results section from --output-dir "
                             "(default for a full run into benchmarks/results)")
    readme.add_argument("--no-readme", dest="readme", action="store_false",
                        help="leave README.md alone")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser


def selected(only: list[str] | None, available: dict[str, Path]) -> dict[str, Path]:
    """The benchmarks named by ``--only`` (all when None), in discovery order.

    Raises
    ------
    SystemExit
        With a message naming the unknown benchmarks.
    """
    if not only:
        return dict(available)
    names = [n.strip() for item in only for n in item.split(",") if n.strip()]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; "
                         f"available: {', '.join(available)}")
    return {n: p for n, p in available.items() if n in names}


def command(path: Path, output: Path, quick: bool) -> list[str]:
    """The command line that runs one benchmark module as a script."""
    return [sys.executable, str(path), *(["--quick"] if quick else []), "--output", str(output)]


def run_one(name: str, path: Path, output_dir: Path, quick: bool) -> tuple[int, float]:
    """Run one benchmark in its own process; returns (exit status, wall seconds)."""
    env = dict(os.environ)  # the caller's: each benchmark imports skxclust first
    print(f"\n=== {name} ({path.name}{' --quick' if quick else ''}) ===", flush=True)
    start = time.perf_counter()
    rc = subprocess.run(command(path, output_dir / f"{name}.json", quick), cwd=ROOT,
                        env=env, check=False).returncode
    return rc, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks, then write or print the report.

    Parameters
    ----------
    argv : list of str or None, default=None
        Arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        0 when every benchmark succeeded, 1 otherwise.
    """
    args = build_parser().parse_args(argv)
    available = discover()
    if args.list:
        for name, path in available.items():
            print(f"{name:16s} {display_path(path)}")
        return 0
    benches = selected(args.only, available)
    default_dir = QUICK_DIR if args.quick else RESULTS_DIR
    output_dir = (args.output_dir or default_dir).resolve()
    write_readme = args.readme
    if write_readme is None:
        write_readme = not args.quick and output_dir == RESULTS_DIR.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    status = {name: run_one(name, path, output_dir, args.quick)
              for name, path in benches.items()}
    total = time.perf_counter() - start

    print(f"\n=== summary ({'quick' if args.quick else 'full'} run, "
          f"results in {display_path(output_dir)}/) ===")
    for name, (rc, seconds) in status.items():
        print(f"{name:16s} {'ok' if rc == 0 else f'FAILED (exit {rc})':16s} {seconds:7.1f} s")
    print(f"{'total':16s} {'':16s} {total:7.1f} s")
    if write_readme:
        readme = ROOT / "README.md"
        changed = report.update_readme(readme, report.render(output_dir))
        print(f"{display_path(readme)}: results section "
              f"{'regenerated' if changed else 'already up to date'}")
    else:
        print("\n" + report.render(output_dir))
    return 0 if all(rc == 0 for rc, _ in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
