"""The Binder setup (``binder/``) against ``pyproject.toml``, and the README's Binder badge.

Binder (repo2docker) reads only ``binder/`` when that folder exists: ``runtime.txt`` picks
the Python, ``requirements.txt`` is installed, then ``postBuild`` runs. These tests check
that this installs what the README installs: every runtime pin and every pin of the ``lab``
extra at pyproject.toml's version (and nothing unpinned), a Python that pyproject.toml
allows and names, the project itself installed by ``postBuild`` (which also brings the
prebuilt JupyterLab extension, shipped as the wheel's shared data), the widget front ends;
and that the README's badge opens ``notebooks/00_start_here.ipynb`` of the repository that
pyproject.toml names.

``test_repo2docker_dockerfile`` runs ``jupyter-repo2docker --no-build --debug`` (no Docker
needed) when repo2docker is installed, and checks the Dockerfile it generates; without it,
that test is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

PROJECT = Path(__file__).resolve().parent.parent
BINDER = PROJECT / "binder"
PYPROJECT = tomllib.loads((PROJECT / "pyproject.toml").read_text())
START_NOTEBOOK = "notebooks/00_start_here.ipynb"
EXTENSION_NAME = "schedule-workbench"
# Without these the lessons' widgets do not render in Binder's JupyterLab.
WIDGET_PACKAGES = ["anywidget", "ipywidgets", "jupyterlab-widgets"]


def _pins(requirements: list[str]) -> dict[str, str]:
    """name -> version of ``name==version`` requirements (names normalised)."""
    pins: dict[str, str] = {}
    for text in requirements:
        requirement = Requirement(text)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", (
            f"pyproject.toml: {text!r} is not pinned with ==")
        pins[canonicalize_name(requirement.name)] = specs[0].version
    return pins


def _expected_pins() -> dict[str, str]:
    """pyproject.toml's runtime dependencies and its ``lab`` extra."""
    project = PYPROJECT["project"]
    return _pins([*project["dependencies"], *project["optional-dependencies"]["lab"]])


def _requirement_lines() -> list[str]:
    lines = []
    for raw in (BINDER / "requirements.txt").read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _binder_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in _requirement_lines():
        assert not line.startswith("-"), (
            f"binder/requirements.txt: {line!r}: only pinned packages belong here (the "
            f"project itself is installed by binder/postBuild)")
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", (
            f"binder/requirements.txt: {line!r} is not pinned to one version with ==")
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"binder/requirements.txt names {name} twice"
        pins[name] = specs[0].version
    return pins


def test_requirements_pin_what_pyproject_pins() -> None:
    expected = _expected_pins()
    pinned = _binder_pins()
    problems = [f"{name}: pyproject.toml pins {version}, binder/requirements.txt "
                f"{pinned.get(name, 'lacks it')}"
                for name, version in sorted(expected.items()) if pinned.get(name) != version]
    problems += [f"{name}=={version}: in binder/requirements.txt but neither a runtime "
                 f"dependency nor in the lab extra of pyproject.toml"
                 for name, version in sorted(pinned.items()) if name not in expected]
    assert not problems, "\n".join(problems)


def test_widget_front_ends_are_installed() -> None:
    pinned = _binder_pins()
    missing = [name for name in WIDGET_PACKAGES if name not in pinned]
    assert not missing, f"binder/requirements.txt lacks {missing}: widgets would not render"


def _runtime_python() -> str:
    text = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", text)
    assert match, f"binder/runtime.txt should read python-X.Y, not {text!r}"
    return match.group(1)


def test_runtime_python_is_allowed_and_named() -> None:
    version = _runtime_python()
    requires = PYPROJECT["project"]["requires-python"]
    assert SpecifierSet(requires).contains(version), (
        f"binder/runtime.txt asks for Python {version}; pyproject.toml requires {requires}")
    classifier = f"Programming Language :: Python :: {version}"
    assert classifier in PYPROJECT["project"]["classifiers"], (
        f"binder/runtime.txt asks for Python {version}, which pyproject.toml's classifiers do "
        f"not name ({classifier!r})")


def _post_build_commands() -> list[list[str]]:
    """postBuild's commands, split into words (comments and blank lines dropped)."""
    commands = []
    for raw in (BINDER / "postBuild").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            commands.append(shlex.split(line, comments=True))
    return commands


def _installs_project(words: list[str]) -> bool:
    """``[python -m] pip install [options] [-e] .[extras]`` (the repository itself)."""
    if "pip" not in words or "install" not in words[words.index("pip"):]:
        return False
    args = words[words.index("install", words.index("pip")) + 1:]
    return any(re.fullmatch(r"\.(\[[\w,-]+\])?", arg) for arg in args)


def test_post_build_installs_the_project() -> None:
    path = BINDER / "postBuild"
    assert path.stat().st_mode & stat.S_IXUSR, "binder/postBuild is not executable"
    assert path.read_text().startswith("#!/usr/bin/env bash\n"), "postBuild needs a bash shebang"
    commands = _post_build_commands()
    assert ["set", "-euo", "pipefail"] in commands, "postBuild should stop at the first failure"
    installs = [words for words in commands if _installs_project(words)]
    assert installs, (
        "binder/postBuild does not install the project (`python -m pip install -e '.[lab]'`); "
        f"its commands: {commands}")
    # The test checks itself: a postBuild that installs something else is not accepted.
    assert not _installs_project(["python", "-m", "pip", "install", "numpy"])
    assert _installs_project(["python", "-m", "pip", "install", "--no-deps", "-e", ".[lab]"])


def test_the_install_brings_the_built_extension() -> None:
    """pip puts the wheel's shared data into <prefix>/share/jupyter/labextensions: the
    committed build in workbench/labextension must be that shared data, and built."""
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    shared = wheel.get("shared-data", {})
    target = f"share/jupyter/labextensions/{EXTENSION_NAME}"
    sources = [source for source, dest in shared.items() if dest.rstrip("/") == target]
    assert sources, f"pyproject.toml's wheel shared-data does not install anything to {target}"
    source = PROJECT / sources[0]
    package = json.loads((source / "package.json").read_text())
    assert package["name"] == EXTENSION_NAME
    load = package.get("jupyterlab", {}).get("_build", {}).get("load", "")
    assert load and (source / load).is_file(), (
        f"{sources[0]} is not a built extension (no jupyterlab._build.load file {load!r})")
    if shutil.which("git") and (PROJECT / ".git").exists():
        # Binder builds from a clone: the build must be committed, not ignored.
        ignored = subprocess.run(["git", "check-ignore", "-q", str(source / "package.json")],
                                 cwd=PROJECT)
        assert ignored.returncode == 1, f"git ignores {sources[0]}: Binder would not get it"


def _repository() -> tuple[str, str]:
    url = PYPROJECT["project"].get("urls", {}).get("Repository", "")
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
    assert match, f"pyproject.toml [project.urls] Repository is not a GitHub URL: {url!r}"
    return match.group(1), match.group(2)


BADGE = re.compile(
    r"\[!\[[^\]]*\]\(https://mybinder\.org/badge_logo\.svg\)\]"
    r"\((https://mybinder\.org/v2/gh/([\w.-]+)/([\w.-]+)/HEAD\?urlpath=([^)\s]+))\)")


def test_readme_badge_opens_the_first_lesson() -> None:
    lines = (PROJECT / "README.md").read_text().splitlines()
    assert lines[0].startswith("# "), "README.md should start with its title"
    top = "\n".join(lines[1:6])  # near the top: within the first lines after the title
    match = BADGE.search(top)
    assert match, ("no Binder badge [![Binder](https://mybinder.org/badge_logo.svg)]"
                   "(https://mybinder.org/v2/gh/OWNER/REPO/HEAD?urlpath=...) in the lines after "
                   f"README.md's title:\n{top}")
    url, owner, repo, urlpath = match.groups()
    assert (owner, repo) == _repository(), (
        f"the badge opens {owner}/{repo}; pyproject.toml's repository is "
        f"{'/'.join(_repository())}")
    assert urlpath == f"lab/tree/{START_NOTEBOOK}", f"the badge opens {urlpath}: {url}"
    assert (PROJECT / START_NOTEBOOK).is_file(), f"the badge opens {START_NOTEBOOK}, missing"


def test_readme_lists_every_lesson() -> None:
    readme = (PROJECT / "README.md").read_text()
    missing = [path.name for path in sorted((PROJECT / "notebooks").glob("*.ipynb"))
               if f"notebooks/{path.name}" not in readme]
    assert not missing, f"README.md's lesson list lacks {missing}"


# --------------------------------------------------------------------------------------
# What repo2docker would build (optional: needs jupyter-repo2docker, not Docker)


def _repo2docker() -> list[str] | None:
    found = shutil.which("jupyter-repo2docker")
    if found:
        return [found]
    if importlib.util.find_spec("repo2docker") is not None:
        return [sys.executable, "-m", "repo2docker"]
    return None


@pytest.mark.skipif(_repo2docker() is None,
                    reason="jupyter-repo2docker is not installed (pip install jupyter-repo2docker)")
def test_repo2docker_dockerfile() -> None:
    """repo2docker's own reading of binder/: the Python, the requirements, postBuild, and
    one environment for the lab server and the kernel (so the server finds the extension
    the project's install put into the kernel's prefix)."""
    done = subprocess.run([*_repo2docker(), "--no-build", "--debug", str(PROJECT)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    python = _runtime_python()
    wanted = [
        f"Building conda environment for python={python}",
        'pip install --no-cache-dir -r "binder/requirements.txt"',
        "RUN ./binder/postBuild",
        "ENV KERNEL_PYTHON_PREFIX=${NB_PYTHON_PREFIX}",
    ]
    wanted += [f"install --yes --no-install-recommends {' '.join(packages)}"
               for packages in [(BINDER / "apt.txt").read_text().split()] if packages]
    missing = [line for line in wanted if line not in text]
    assert not missing, f"repo2docker's Dockerfile lacks {missing}:\n{text[-4000:]}"
