"""Saving a trace or a schedule never replaces what is not a regular file (a device, a
FIFO, a directory), writes through a symbolic link, and leaves no temporary file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import workbench as wb
from workbench.schedule.atomic import NotARegularFileError, write_text_atomic
from workbench.widgets.editor import ScheduleEditor


def _schedule() -> wb.Schedule:
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[None, 4])
    return sch


def _trace_save(path):
    _schedule().trace.save(path)


def _schedule_save(path):
    _schedule().save(path)


def _editor_save_trace(path):
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    editor.trace_path.value = str(path)
    editor.save_button.click()
    if "saved" not in editor.trace_status.value:  # the editor shows errors, never raises
        assert "NotARegularFileError" in editor.error_html.value
        raise NotARegularFileError(editor.error_html.value)


def _editor_save_schedule(path):
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    editor.model.save_schedule(path)


SAVERS = [_trace_save, _schedule_save, _editor_save_trace, _editor_save_schedule]


def _no_temp_files(folder: Path) -> None:
    left = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert not left, left


@pytest.mark.parametrize("save", SAVERS)
def test_fifo_is_refused_and_kept(tmp_path, save):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFileError, match="FIFO"):
        save(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    _no_temp_files(tmp_path)


@pytest.mark.parametrize("save", SAVERS)
def test_directory_is_refused_without_leftovers(tmp_path, save):
    folder = tmp_path / "out.json"
    folder.mkdir()
    with pytest.raises(NotARegularFileError, match="directory"):
        save(folder)
    assert folder.is_dir() and not list(folder.iterdir())
    _no_temp_files(tmp_path)


@pytest.fixture
def no_device_replaced(monkeypatch):
    """A rename onto an existing file that is not a regular one fails the test instead of
    happening: a regression must not replace the machine's /dev/null."""
    real_replace = os.replace

    def guarded(src, dst, *args, **kwargs):
        try:
            mode = os.stat(dst).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise AssertionError(f"about to replace {dst!r}, which is not a regular file")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", guarded)


def test_device_is_never_replaced(no_device_replaced):
    with pytest.raises(NotARegularFileError, match="character device"):
        _schedule().trace.save("/dev/null")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_symlink_to_a_device_is_refused(tmp_path, no_device_replaced):
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    with pytest.raises(NotARegularFileError, match="/dev/null"):
        _schedule().save(link)
    assert link.is_symlink()
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


@pytest.mark.parametrize("save", SAVERS)
def test_symlink_is_written_through(tmp_path, save):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    save(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith(("[", "{"))
    _no_temp_files(tmp_path)


@pytest.mark.parametrize("save", SAVERS)
def test_regular_file_is_replaced_keeping_its_mode(tmp_path, save):
    path = tmp_path / "t.json"
    path.write_text("old")
    path.chmod(0o640)
    save(path)
    assert path.read_text() != "old"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    _no_temp_files(tmp_path)


def test_saved_trace_loads_back(tmp_path):
    sch = _schedule()
    sch.trace.save(tmp_path / "t.json")
    assert str(wb.Trace.load(tmp_path / "t.json")) == str(sch.trace)


def test_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(tmp_path / "t.json", "[]")
    assert not list(tmp_path.iterdir())


def test_missing_folder_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_text_atomic(tmp_path / "nope" / "t.json", "[]")
