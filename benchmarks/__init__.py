"""The project's benchmarks: ``python -m benchmarks`` runs them all (``--help`` for options).

Each ``bench_<name>.py`` module is a stand-alone script with ``--quick`` and ``--output``
(see :mod:`benchmarks._common`); :mod:`benchmarks.runner` finds and runs them, and
:mod:`benchmarks.report` turns their JSON results into the README's results section.
"""
