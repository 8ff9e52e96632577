"""Run TVM's own schedule unit tests against the workbench and count where they agree.

    .venv/bin/python bench/tvm_parity/run.py --tvm-tests DIR [--list] [--json out.json]
        [--files test_tir_schedule_split_fuse.py ...] [--all] [-k EXPR] [--timeout 60]

``DIR`` holds TVM's schedule test files (``test_tir_schedule_*.py`` from
``tests/python/s_tir/schedule`` of apache/tvm; any folder above them works too). The
files are read where they are, at run time; nothing of them is copied.

How a test runs. Each file runs under pytest in a subprocess (``python -m pytest
--tb=line -q -p no:cacheprovider``) whose ``sys.path`` starts with ``shim/``: a
stand-in ``tvm`` package (never installed) that maps what the tests import onto the
workbench:

* ``tvm.s_tir.Schedule`` is ``wb.Schedule`` (a PrimFunc is scheduled as
  ``{"main": func}``; TVM-only options such as ``debug_mask`` are ignored);
  ``tvm.s_tir.ScheduleError`` is ``wb.ScheduleError``.
* ``@T.prim_func`` / ``@I.ir_module`` / ``tvm.script.from_source`` are the workbench's
  TVMScript reader, parsing on first use: a function it cannot read fails only the
  tests that use it.
* ``tvm.ir.assert_structural_equal`` and ``assert_structural_equal_ignore_global_symbol``
  compare the workbench's printed IR token by token, modulo a consistent renaming of
  variables, buffers and block names (TVM's structural equality ignores these names;
  differing block names are noted beside the verdict). The ``T.reads`` /
  ``T.writes`` of TVMScript that is read are derived from the block bodies, as the
  workbench always does.
* ``verify_trace_roundtrip`` is the workbench's trace round trip (JSON and Python text
  replays give the same IR and the same trace).
* ``tvm.testing.parameter`` makes pytest fixtures as TVM's does; ``tvm.te`` is
  ``workbench.te``; TVM's trace objects (``Trace``, ``Instruction``) go through TVM's
  trace JSON.

A small plugin (``shim/tvm_parity_plugin.py``) records each test's verdict. The
workbench's own tests and processes are never touched.

Verdicts, per pytest item (a parametrized test counts once per parameter set):

* **agree**: the test passes on the workbench.
* **disagree**, in rough classes: *wrong IR* (the IR differs from TVM's expected IR;
  the first differing line of each side is named), *we refuse what TVM accepts* (a
  ``ScheduleError`` TVM does not raise), *we accept what TVM refuses*
  (``pytest.raises`` saw no error), *same refusal, other message or type*
  (``pytest.raises(match=...)`` or another exception type), *parse error* (the
  TVMScript reader refused a definition; the construct is named), *trace round trip*,
  *API: ...* (TVM's Python API shape: a block or buffer given by name, a keyword the
  workbench lacks, a node attribute), *different result* (another assertion of the
  test) and *workbench crash* (any other exception raised inside the workbench: a
  bug).
* **n/a** (not counted): the test reaches a primitive or facility the workbench does
  not have (any name the shim does not map, e.g. ``sch.transform_layout``,
  ``sch.get_sref``, ``tvm.build``), TVM itself skips or xfails it, or it checks
  something only TVM's objects have (the short ``TVM_ONLY`` list).
* **error**: the test could not be judged: it hung (stopped after ``--timeout``
  seconds; a hang that ignores signals kills the subprocess, which then resumes
  after that test), its file failed to import, or the shim itself failed.

"N of M agree" counts pytest items, M = agree + disagree + error. The default files
are those of the primitives the workbench has (``APPLICABLE``); ``--files`` picks
others, ``--all`` runs every ``test_tir_schedule_*.py`` and ``-k EXPR`` selects tests
as pytest's ``-k`` does. Results go to
``bench/results/tvm_parity.json`` (or ``--json``): every test's verdict, class, first
line of the failure, the test line it came from and the traceback.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIM = HERE / "shim"
REPO = HERE.parents[1]
DEFAULT_JSON = REPO / "bench" / "results" / "tvm_parity.json"

# Test files of the primitives the workbench has
APPLICABLE = [
    "test_tir_schedule_split_fuse.py",
    "test_tir_schedule_reorder.py",
    "test_tir_schedule_for_kind.py",
    "test_tir_schedule_compute_at.py",
    "test_tir_schedule_compute_inline.py",
    "test_tir_schedule_cache_read_write.py",
    "test_tir_schedule_set_scope.py",
    "test_tir_schedule_storage_align.py",
    "test_tir_schedule_reduction.py",
    "test_tir_schedule_rfactor.py",
    "test_tir_schedule_blockize.py",
    "test_tir_schedule_sampling.py",
    "test_tir_schedule_trace.py",
    "test_tir_schedule_utilities.py",
    "test_tir_schedule_state.py",
    "test_tir_schedule_merge.py",
    "test_tir_schedule_reorder_block_iter_var.py",
    "test_tir_schedule_transform_layout.py",
    "test_tir_schedule_reindex.py",
    "test_tir_schedule_read_write_at.py",
    "test_tir_schedule_cache_index.py",
    "test_tir_schedule_decompose_padding.py",
    "test_tir_schedule_pad_einsum.py",
    "test_tir_schedule_set_dtype.py",
    "test_tir_schedule_annotate_buffer_access.py",
    "test_tir_schedule_partition.py",
    "test_tir_schedule_rolling_buffer.py",
    "test_tir_schedule_fuse_reduction_epilogue.py",
    "test_tir_schedule_fuse_reduction_epilogue_relu.py",
    "test_tir_schedule_fuse_reduction_epilogue_clipping.py",
    "test_tir_schedule_tensorize.py",
]

# Tests that check something only TVM's objects have; counted as not applicable
TVM_ONLY = {
    "test_tir_schedule_trace.py::test_apply_json_to_schedule_sample_categorical":
        "compares str() of TVM's FloatImm objects inside the trace JSON",
}

STATUSES = ("agree", "disagree", "n/a", "error")
CLASS_ORDER = [
    "wrong IR",
    "we refuse what TVM accepts",
    "we accept what TVM refuses",
    "same refusal, other message or type",
    "parse error",
    "trace round trip",
    "API: block/buffer given by name",
    "API: arguments",
    "API: attribute",
    "different result",
    "workbench crash",
]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def find_files(root: Path, names: list[str] | None, run_all: bool) -> list[Path]:
    """The test files to run, in ``names`` order (default: ``APPLICABLE``)."""
    found: dict[str, Path] = {}
    for p in sorted(root.rglob("test_*.py")):
        found.setdefault(p.name, p)
    if run_all:
        return [found[n] for n in sorted(found) if n.startswith("test_tir_schedule_")]
    wanted = names or APPLICABLE
    missing = [n for n in wanted if n not in found]
    if missing and names:
        raise SystemExit(f"not found under {root}: {', '.join(missing)}")
    return [found[n] for n in wanted if n in found]


def declared_tests(path: Path) -> list[str]:
    """Names of the test functions of a file (for a file that fails to import)."""
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name.startswith("test")]


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut short by a kill
    return out


def run_file(path: Path, python: str, timeout: float, workdir: Path,
             keyword: str | None = None) -> tuple[list[dict], str]:
    """Run one test file; returns its result records and a note (empty when normal).

    A hang that SIGALRM cannot stop (no progress for ``timeout + 15`` s) kills the
    subprocess; the hung test is an error and the file resumes after it. A test that
    kills the process (a crash) is handled the same way."""
    out = workdir / f"{path.stem}.jsonl"
    skip = workdir / f"{path.stem}.skip"
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIM), str(REPO)])
    env.update(TVM_PARITY_OUT=str(out), TVM_PARITY_TIMEOUT=str(timeout),
               TVM_PARITY_SKIP=str(skip), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    cmd = [python, "-m", "pytest", str(path), "--tb=line", "-q", "-p", "no:cacheprovider",
           "-p", "tvm_parity_plugin", "--noconftest", "-c", str(ini),
           "--rootdir", str(path.parent), "-W", "ignore::DeprecationWarning"]
    if keyword:
        cmd += ["-k", keyword]
    results: dict[str, dict] = {}
    notes = []
    for _attempt in range(200):
        skip.write_text("\n".join(results))
        log = open(workdir / f"{path.stem}.log", "w")
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        last_size, last_change = -1, time.monotonic()
        killed = False
        while proc.poll() is None:
            time.sleep(0.2)
            size = out.stat().st_size if out.exists() else 0
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            elif time.monotonic() - last_change > timeout + 15:
                proc.kill()
                killed = True
                proc.wait()
        log.close()
        records = _read_jsonl(out)
        started = None
        for r in records:
            if r["event"] == "start":
                started = r["id"]
            elif r["event"] == "result":
                results[r["id"]] = r
                started = None
            elif r["event"] == "collect_error" and r["id"] not in results:
                results[r["id"]] = {"event": "collect_error", **r}
        if started is not None and started not in results:
            how = "hung (killed)" if killed else f"killed the test process (exit {proc.returncode})"
            cls = "timeout" if killed else "crash"
            results[started] = {"event": "result", "id": started, "status": "error",
                                "cls": cls, "message": f"the test {how}", "where": "",
                                "detail": ""}
            notes.append(f"{started}: {how}")
            continue
        if proc.returncode not in (0, 1, 2, 5):
            tail = (workdir / f"{path.stem}.log").read_text()[-600:]
            notes.append(f"pytest exited with {proc.returncode}: {tail.strip()}")
        break
    return _expand(path, list(results.values())), "; ".join(notes)


def _expand(path: Path, records: list[dict]) -> list[dict]:
    """Test records; a file that failed to import counts each of its test functions
    as an error (or not applicable when it imports something the workbench lacks)."""
    tests = [r for r in records if r["event"] == "result"]
    for err in (r for r in records if r["event"] == "collect_error"):
        na = "no workbench counterpart" in err["message"]
        for name in declared_tests(path):
            tests.append({"id": f"{path.name}::{name}", "status": "n/a" if na else "error",
                          "cls": "no workbench counterpart" if na else "file does not import",
                          "message": err["message"], "where": "", "detail": err["detail"]})
    for t in tests:
        t.pop("event", None)
        t.setdefault("notes", [])
        if t["id"] in TVM_ONLY and t["status"] != "agree":
            t["message"] = f"{TVM_ONLY[t['id']]} (verdict was: {t['status']}, {t['message']})"
            t["status"], t["cls"] = "n/a", "TVM-only check (marker list)"
    return tests


def summarize(files: dict[str, list[dict]]) -> dict:
    table = {}
    funcs: dict[str, list[str]] = defaultdict(list)
    for name, tests in files.items():
        counts = Counter(t["status"] for t in tests)
        table[name] = {s: counts.get(s, 0) for s in STATUSES}
        table[name]["tests"] = len(tests)
        for t in tests:
            funcs[t["id"].split("[", 1)[0]].append(t["status"])
    total = {s: sum(row[s] for row in table.values()) for s in (*STATUSES, "tests")}
    fstat = Counter()
    for statuses in funcs.values():
        applicable = [s for s in statuses if s != "n/a"]
        if not applicable:
            fstat["n/a"] += 1
        elif all(s == "agree" for s in applicable):
            fstat["agree"] += 1
        elif "disagree" in applicable:
            fstat["disagree"] += 1
        else:
            fstat["error"] += 1
    return {"files": table, "total": total, "functions": dict(fstat)}


def _short(name: str) -> str:
    return name.removeprefix("test_tir_schedule_").removesuffix(".py")


def render_table(summary: dict) -> str:
    w = max([len(_short(n)) for n in summary["files"]] + [5])
    rows = [f"{'file':<{w}} {'tests':>5} {'agree':>5} {'disagree':>8} {'n/a':>4} {'error':>5}"]
    named = [*summary["files"].items(), ("total", summary["total"])]
    for name, r in named:
        rows.append(f"{_short(name):<{w}} {r['tests']:>5} {r['agree']:>5} {r['disagree']:>8} "
                    f"{r['n/a']:>4} {r['error']:>5}")
    return "\n".join(rows)


def agree_line(summary: dict) -> str:
    t, f = summary["total"], summary["functions"]
    applicable = t["agree"] + t["disagree"] + t["error"]
    fapp = f.get("agree", 0) + f.get("disagree", 0) + f.get("error", 0)
    return (f"{t['agree']} of {applicable} agree (pytest items that apply; {t['n/a']} not "
            f"applicable)\nby test function: {f.get('agree', 0)} of {fapp} agree "
            f"({f.get('n/a', 0)} not applicable)")


def _parse_key(message: str) -> str:
    """The construct of a parse error: the parser's message without the location."""
    text = message.split("): ", 1)[-1] if "(line " in message else message.split(": ", 1)[-1]
    return text.split(";")[0].strip()


def render_list(files: dict[str, list[dict]]) -> str:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for tests in files.values():
        for t in tests:
            if t["status"] in ("disagree", "error"):
                groups[(t["status"], t["cls"])].append(t)
    order = {c: i for i, c in enumerate(CLASS_ORDER)}
    keys = sorted(groups, key=lambda k: (k[0] != "disagree", order.get(k[1], 99), k[1]))
    out = []
    for status, cls in keys:
        items = groups[(status, cls)]
        out.append(f"\n## {status}: {cls} ({len(items)})")
        if cls == "parse error":
            by_construct: dict[str, list[dict]] = defaultdict(list)
            for t in items:
                by_construct[_parse_key(t["message"])].append(t)
            for construct, its in sorted(by_construct.items(), key=lambda kv: -len(kv[1])):
                out.append(f"  [{len(its)}] {construct}")
                for t in its:
                    out.append(f"      {t['id']}  -- {t['message'].split(' (line')[0]}")
            continue
        for t in items:
            where = f"  ({t['where']})" if t.get("where") else ""
            out.append(f"  {t['id']}{where}\n      {t['message']}")
    noted = [(t["id"], n) for tests in files.values() for t in tests
             if t["status"] == "agree" for n in t.get("notes", [])]
    if noted:
        out.append(f"\n## agree, with a note ({len(noted)})")
        for tid, note in noted:
            out.append(f"  {tid}\n      {note}")
    na = Counter()
    for tests in files.values():
        for t in tests:
            if t["status"] == "n/a":
                msg = t["message"].split(" has no workbench counterpart")[0]
                na[f"{t['cls']}: {msg}" if t["cls"] != "no workbench counterpart" else msg] += 1
    if na:
        out.append(f"\n## not applicable ({sum(na.values())}), by what the test needs")
        for what, n in na.most_common():
            out.append(f"  [{n}] {what[:150]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tvm-tests", required=True, type=Path,
                    help="folder holding TVM's test_tir_schedule_*.py files")
    ap.add_argument("--files", nargs="+", help="test file names to run (default: the "
                    "files of the primitives the workbench has)")
    ap.add_argument("--all", action="store_true", help="run every test_tir_schedule_*.py")
    ap.add_argument("-k", dest="keyword", help="only the tests pytest's -k selects")
    ap.add_argument("--list", action="store_true",
                    help="list every disagreeing test with the first line of its failure")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with the workbench and pytest")
    args = ap.parse_args(argv)

    if not args.tvm_tests.is_dir():
        raise SystemExit(f"--tvm-tests: {args.tvm_tests} is not a folder")
    paths = find_files(args.tvm_tests.resolve(), args.files, args.all)
    if not paths:
        raise SystemExit(f"no TVM schedule test files under {args.tvm_tests}")
    files: dict[str, list[dict]] = {}
    notes: dict[str, str] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tvm_parity_") as tmp:
        for path in paths:
            t0 = time.perf_counter()
            tests, note = run_file(path, args.python, args.timeout, Path(tmp), args.keyword)
            files[path.name] = sorted(tests, key=lambda t: t["id"])
            if note:
                notes[path.name] = note
            print(f"  {_short(path.name):<22} {len(tests):>4} tests  "
                  f"{time.perf_counter() - t0:6.1f} s", file=sys.stderr)
    summary = summarize(files)
    print(f"TVM schedule tests run on the workbench ({len(paths)} files, "
          f"{time.perf_counter() - start:.0f} s)")
    print(f"CPU: {cpu_model()}")
    print(render_table(summary))
    print(agree_line(summary))
    for name, note in notes.items():
        print(f"note: {_short(name)}: {note}")
    if args.list:
        print(render_list(files))
    import workbench

    record = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "workbench": getattr(workbench, "__version__", "?"),
        "tvm_tests": str(args.tvm_tests),
        "summary": summary,
        "notes": notes,
        "tests": files,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1))
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
