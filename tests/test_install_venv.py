"""An install of the checkout into a clean virtual environment imports every package
of the tree (issue 27 item 6): pyproject.toml's package list and package data are
what a user's `pip install .` gets.

The venv sees the system's site-packages (the dependencies, Debian packages in
the sealed runtime, pip and setuptools among them) but not the checkout: the
venv's Python runs the system's pip on a copy of the tracked tree, `pip install
--no-index --no-deps --no-build-isolation`, so no network is needed, and every
package is imported from a directory outside the checkout, by a Python started
there.  The list of packages is the tree's
(tests/test_packaging.py), not a hand-written one.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.test_packaging import packages_in_tree

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 300  # seconds, each step on two busy cores
PROBE = """
import importlib, json, sys
found, missing = {}, {}
for name in sys.argv[1:]:
    try:
        found[name] = importlib.import_module(name).__file__
    except ImportError as exc:
        missing[name] = str(exc)
print(json.dumps({"found": found, "missing": missing}))
"""

def _can_make_venv() -> str:
    """Why the checkout cannot be installed into a venv here ("" when it can): the
    venv has no pip of its own (no ensurepip, no download), it runs the system's pip,
    which builds with the system's setuptools."""
    for name in ("pip", "setuptools"):
        if importlib.util.find_spec(name) is None:
            return f"no {name} (Debian: python3-{name})"
    return ""


def _copy_tree(dest: Path) -> None:
    """The checkout's tracked files (git's list where there is one), no build leftovers."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           timeout=60) if shutil.which("git") else None
    if names is not None and names.returncode == 0 and names.stdout:
        for name in names.stdout.decode().split("\0"):
            if name and (REPO / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, dest / name)
        return
    shutil.copytree(REPO, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "out", "out-*", ".mypy_cache",
        ".ruff_cache"))


def test_a_clean_venv_install_imports_every_package(tmp_path: Path) -> None:
    why = _can_make_venv()
    if why:
        # Inside the sealed runtime the packages are there: not having them is a defect.
        assert not os.environ.get("OVSTEST_SEALED"), f"the runtime root lacks {why}"
        pytest.skip(f"cannot make a venv with pip here: {why}")
    src, env_dir, elsewhere = tmp_path / "src", tmp_path / "venv", tmp_path / "run"
    src.mkdir()
    elsewhere.mkdir()
    _copy_tree(src)
    venv.EnvBuilder(system_site_packages=True, with_pip=False, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps",
                              "--no-build-isolation", "--no-cache-dir", "--quiet", str(src)],
                             cwd=elsewhere, env=env, capture_output=True, text=True,
                             timeout=TIMEOUT)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    packages = sorted(packages_in_tree())
    assert {"harness", "evidence", "tooling", "datapath.model", "datapath.deviations", "fixtures",
            "reports", "export", "perf"} <= set(packages)
    probe = subprocess.run([str(python), "-c", PROBE, *packages], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=TIMEOUT)
    assert probe.returncode == 0, probe.stderr[-3000:]
    answer = json.loads(probe.stdout)
    assert not answer["missing"], f"not importable from the install (pyproject.toml): {answer['missing']}"
    found = answer["found"]
    assert sorted(found) == packages
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], env=env, capture_output=True, text=True,
                          timeout=60).stdout.strip()
    outside = {name: path for name, path in found.items()
               if not Path(path).resolve().is_relative_to(Path(site).resolve())}
    assert not outside, f"imported from outside the venv: {outside}"
    # The package data the framework reads at run time came along.
    for data in ("reports/templates", "reports/durations.json", "export/fixes/series"):
        assert (Path(site) / data).exists(), data
    assert sys.prefix != str(env_dir)
