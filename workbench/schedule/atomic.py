"""Writing a file atomically, without clobbering what is not a regular file.

:func:`write_text_atomic` is what ``Trace.save``, ``Schedule.save`` and the editor's Save
buttons write with:

* the text goes to a fresh temporary file beside the target (a unique name, created with
  ``O_EXCL``), which is then renamed over the target: a reader sees the old file or the
  new one, never half of it; the temporary file never outlives the call, even on an
  error;
* an existing target must be a regular file: a directory, a FIFO, a device (``/dev/null``)
  or a socket is refused with :class:`NotARegularFileError` and left alone;
* a symbolic link is written *through*: the file it points to is replaced (with the same
  checks) and the link stays a link, as ``open(path, "w")`` would treat it. Replacing the
  link itself by a regular file would silently cut it from the file it shared.
* a replaced file keeps its permission bits; a new one gets the usual ``0o666`` less the
  umask.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
>>> write_text_atomic(p, "[]\\n") == p
True
>>> p.read_text()
'[]\\n'
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

__all__ = ["NotARegularFileError", "write_text_atomic"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotARegularFileError(OSError):
    """The target of a save exists and is not a regular file (nothing was written)."""


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def write_text_atomic(path: str | os.PathLike, text: str, what: str = "save") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path`` (as given).

    ``what`` names the operation in errors (``"Trace.save"``). Raises
    :class:`NotARegularFileError` when ``path`` (or the file a link points to) exists
    and is not a regular file; other ``OSError`` (a missing folder, no permission)
    pass through. No temporary file is left behind in any case.
    """
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    mode = None
    try:
        st = os.stat(target)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            via = f" (the target of the link {str(given)!r})" if target != given else ""
            raise NotARegularFileError(
                f"{what}: {str(target)!r}{via} is {_kind(st.st_mode)}, not a regular file; "
                "refusing to replace it"
            )
        mode = stat.S_IMODE(st.st_mode)
    data = text.encode()
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return given
