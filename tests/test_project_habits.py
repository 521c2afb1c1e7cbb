"""What the project says it keeps: the lint and type gate in the README's test command,
the ``py.typed`` marker of a typed package, and a changelog with an Unreleased section."""

import importlib.resources
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
MAKEFILE = REPO / "Makefile"
LINTED = ("skxclust", "tests", "benchmarks", "examples")


def make_rules(text: str) -> dict[str, tuple[list[str], list[str]]]:
    """``{target: (prerequisites, recipe lines)}`` of a Makefile's explicit rules."""
    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("\t"):
            if current is not None:
                current.append(line.strip())
            continue
        match = re.match(r"^([^\s:=#]+)\s*:(?![=:])\s*(.*)$", line)
        if match:
            current = []
            rules[match.group(1)] = (match.group(2).split(), current)
        elif line.strip() and not line.startswith("#"):
            current = None
    return rules


def make_commands(rules, target: str, done: set[str] | None = None) -> list[str]:
    """The recipe lines ``make target`` runs, in order: prerequisites' first."""
    done = set() if done is None else done
    if target in done or target not in rules:
        return []
    done.add(target)
    prerequisites, recipe = rules[target]
    commands = [c for p in prerequisites for c in make_commands(rules, p, done)]
    return commands + recipe


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11 (CI runs 3.11)
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def first_index(commands: list[str], pattern: str) -> int:
    found = [i for i, command in enumerate(commands) if re.search(pattern, command)]
    assert found, f"no command matching {pattern!r} in {commands}"
    return found[0]


def test_make_test_runs_ruff_and_mypy_before_pytest():
    # `make test` is the README's test command and what .ci/run calls
    assert "make test" in (REPO / ".ci" / "run").read_text()
    commands = make_commands(make_rules(MAKEFILE.read_text()), "test")
    ruff = first_index(commands, r"-m ruff check\b")
    mypy = first_index(commands, r"-m mypy\b")
    pytest_ = first_index(commands, r"-m pytest\b")
    assert ruff < pytest_ and mypy < pytest_, commands
    assert set(LINTED) <= set(commands[ruff].split()), commands[ruff]
    assert "skxclust" in commands[mypy].split(), commands[mypy]
    for command in (commands[ruff], commands[mypy]):
        # a failing check must fail `make test`: no "-" prefix, no "|| true"
        assert not command.startswith("-") and "||" not in command, command


def test_make_rules_parser_sees_prerequisites_and_recipes():
    rules = make_rules("A := 1\nall: b\n\techo all\nb:\n\techo b\n")
    assert make_commands(rules, "all") == ["echo b", "echo all"]


def test_test_extra_installs_the_checkers():
    # `make install` installs the [test] extra, so a fresh checkout has both checkers
    config = pyproject()
    extra = config["project"]["optional-dependencies"]["test"]
    names = {re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0] for requirement in extra}
    assert {"ruff", "mypy"} <= names
    assert config["tool"]["mypy"]["files"] == ["skxclust"]


def test_package_ships_py_typed():
    marker = importlib.resources.files("skxclust").joinpath("py.typed")
    assert marker.is_file(), "skxclust/py.typed is missing (PEP 561 marker)"
    package_data = pyproject()["tool"]["setuptools"].get("package-data", {})
    assert "py.typed" in package_data.get("skxclust", []), "py.typed not in package data"


def test_changelog_has_an_unreleased_section():
    changelog = REPO / "CHANGELOG.md"
    if not changelog.is_file():
        pytest.fail("CHANGELOG.md is missing")
    headings = re.findall(r"^## (.+)$", changelog.read_text(), flags=re.MULTILINE)
    assert headings and headings[0].strip() == "Unreleased", headings
