"""pyproject.toml: the packages an install carries are every package of the framework."""
from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOT_INSTALLED = {"cases", "tests"}  # run from the checkout, never imported by the framework


def packages_in_tree() -> set[str]:
    return {".".join(p.parent.relative_to(REPO).parts) for p in REPO.glob("*/**/__init__.py")
            if p.parent.relative_to(REPO).parts[0] not in NOT_INSTALLED
            and not p.parent.relative_to(REPO).parts[0].startswith((".", "build"))}


def test_every_package_is_installed() -> None:
    """setuptools' find with the include patterns takes every package directory
    (datapath.deviations was once left out of a hand-written list)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = config["packages"]["find"]["include"]
    tree = packages_in_tree()
    assert {"harness", "datapath", "datapath.deviations", "datapath.model"} <= tree
    missed = sorted(p for p in tree if not any(fnmatchcase(p, pat) for pat in include))
    assert not missed, f"packages pyproject.toml does not install: {missed}"


def test_package_data_exists() -> None:
    """Every package-data glob names files that are there (the templates, the
    recorded durations, the fixes and disclosures export --series reads)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, globs in config["package-data"].items():
        for pattern in globs:
            assert list((REPO / package).glob(pattern)), f"{package}/{pattern} matches nothing"
