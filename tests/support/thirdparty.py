"""Clients and suites none of us wrote, installed from the registries into temporary folders for
one test session (never copied into the repository): a virtualenv of PyPI packages, an npm
project, the files of a package's source distribution. Each helper skips the test, saying why,
when the tool or the registry is not there; ``make test-engines`` (and so CI) runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

#: How long one install may take before the test is skipped as "registry too slow".
INSTALL_TIMEOUT = 600.0


def _run(command: list[str], cwd: Path | None = None, what: str = "") -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what or command[0]}: no answer from the registry in {INSTALL_TIMEOUT:.0f} s")
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        pytest.skip(f"{what or command[0]} failed (no registry?): {' / '.join(tail)}")


def python_env(folder: Path, *requirements: str) -> Path:
    """A virtualenv in ``folder`` with ``requirements`` installed from PyPI (exact pins, so a run
    is repeatable); its python. Made once per folder: a session fixture passes the same one."""
    python = folder / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(folder)
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *requirements,
            ],
            what=f"pip install {' '.join(requirements)}",
        )
    return python


def python_packages(folder: Path, *requirements: str) -> Path:
    """``requirements`` (exact pins) installed from PyPI into ``folder`` without their
    dependencies, for a PYTHONPATH beside this environment's own packages (a suite that needs a
    few test plugins more than graphmem's environment has); the folder. Made once per folder."""
    if not (folder / ".installed").exists():
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
                str(folder),
                *requirements,
            ],
            what=f"pip install {' '.join(requirements)}",
        )
        (folder / ".installed").touch()
    return folder


def npm_project(folder: Path, *packages: str) -> Path:
    """An npm project in ``folder`` with ``packages`` (exact versions) installed; the folder.
    Skips when node or npm is missing."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the npm suites need Node.js and npm")
    if not (folder / "node_modules").exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"private": true, "type": "module"}\n')
        _run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", *packages],
            cwd=folder,
            what=f"npm install {' '.join(packages)}",
        )
    return folder


def sdist(folder: Path, requirement: str) -> Path:
    """The unpacked source distribution of ``requirement`` (``name==version``) from PyPI, under
    ``folder``; the package's top folder (its tests are there)."""
    name, _, version = requirement.partition("==")
    unpacked = [p for p in folder.glob("*") if p.is_dir()] if folder.exists() else []
    if not unpacked:
        folder.mkdir(parents=True, exist_ok=True)
        # pip reads an sdist's metadata by building it, with its build backend (hatchling,
        # say) installed from PyPI into an isolated environment, as pip does by default.
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                str(folder),
                requirement,
            ],
            what=f"pip download {requirement}",
        )
        archive = next(folder.glob("*.tar.gz"), None)
        if archive is None:
            pytest.skip(f"PyPI has no source distribution of {requirement}")
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
        unpacked = [p for p in folder.glob("*") if p.is_dir()]
    assert len(unpacked) == 1, unpacked
    del name, version
    return unpacked[0]
