"""Build the JupyterLab extension into ``workbench/labextension`` when its sources changed.

The built extension is committed, so installing the Python package needs neither node nor
npm. This script keeps it in step with the sources:

``python extensions/build.py check``
    exit 0 when ``workbench/labextension/build.json`` records the hash of the current
    sources, 1 otherwise.
``python extensions/build.py build --jlpm .venv/bin/jlpm``
    rebuild (``jlpm install`` when needed, then ``jlpm build:prod``) and write
    ``install.json`` and ``build.json``, only when the sources changed; without node it
    says so loudly and leaves the committed build in place.
``python extensions/build.py hash``
    print the hash of the sources.

Standard library only: it runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUTPUT = ROOT / "workbench" / "labextension"
STAMP = OUTPUT / "build.json"
NAME = "schedule-workbench"
#: What the build reads: a change to any of these means the committed build is stale.
SOURCE_FILES = ("package.json", "yarn.lock", "tsconfig.json", ".yarnrc.yml")
SOURCE_DIRS = ("src", "style")
INSTALL = {
    "packageManager": "python",
    "packageName": "schedule-workbench",
    "uninstallInstructions": "Use your Python package manager (pip, conda, etc.) to "
                             "uninstall the package schedule-workbench",
}


def source_paths(root: Path = HERE) -> list[Path]:
    """The extension's source files (tests excluded), sorted."""
    paths = [root / name for name in SOURCE_FILES]
    for folder in SOURCE_DIRS:
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__tests__" not in path.relative_to(root).parts:
                paths.append(path)
    return sorted(paths)


def source_hash(root: Path = HERE) -> str:
    """SHA-256 over the sources' relative paths and bytes (line endings as stored)."""
    digest = hashlib.sha256()
    for path in source_paths(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def recorded_hash(output: Path = OUTPUT) -> str | None:
    """The sources hash the committed build was made from, or None."""
    try:
        return json.loads((output / "build.json").read_text())["sources_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def up_to_date() -> bool:
    return recorded_hash() == source_hash() and (OUTPUT / "package.json").is_file()


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=HERE, **kw)


def build(jlpm: str) -> int:
    jlpm = str(Path(jlpm).resolve()) if os.sep in jlpm else jlpm
    if up_to_date():
        print(f"{NAME}: the built extension in {OUTPUT.relative_to(ROOT)} is up to date")
        return 0
    if shutil.which("node") is None:
        bar = "!" * 78
        print(f"{bar}\n{NAME}: the extension's sources changed since the committed build, "
              f"but node is not installed:\nusing the committed (stale) build in "
              f"{OUTPUT.relative_to(ROOT)}. Install node >= 20 and run `make labextension`.\n"
              f"{bar}", file=sys.stderr, flush=True)
        return 0
    env = dict(os.environ)
    # `jupyter labextension build` runs from the same environment as jlpm
    if os.sep in jlpm:
        env["PATH"] = str(Path(jlpm).parent) + os.pathsep + env.get("PATH", "")
    marker = HERE / "node_modules" / ".yarn-state.yml"
    inputs = [HERE / "package.json", HERE / "yarn.lock"]
    if not marker.exists() or any(p.stat().st_mtime > marker.stat().st_mtime for p in inputs):
        _run([jlpm, "install"], env=env)
    _run([jlpm, "build:prod"], env=env)
    (OUTPUT / "install.json").write_text(json.dumps(INSTALL, indent=2) + "\n")
    files = sorted(p.relative_to(OUTPUT).as_posix() for p in OUTPUT.rglob("*") if p.is_file())
    STAMP.write_text(json.dumps({"sources_sha256": source_hash(), "files": files},
                                indent=2) + "\n")
    print(f"{NAME}: built into {OUTPUT.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    sub.add_parser("hash")
    b = sub.add_parser("build")
    b.add_argument("--jlpm", default="jlpm", help="JupyterLab's yarn (default: jlpm on PATH)")
    args = parser.parse_args(argv)
    if args.command == "hash":
        print(source_hash())
        return 0
    if args.command == "check":
        ok = up_to_date()
        print(f"{NAME}: the committed build is {'up to date' if ok else 'STALE'}")
        return 0 if ok else 1
    return build(args.jlpm)


if __name__ == "__main__":
    sys.exit(main())
