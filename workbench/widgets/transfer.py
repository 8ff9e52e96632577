"""``Transfer``: text files between the kernel and the user's computer.

A Jupyter kernel runs on a server: ``open(path, "w")`` writes next to the notebook
*there*, not on the computer in front of the user. This small widget (an anywidget,
front end in ``static/transfer.js``) moves text through the browser instead:

- :meth:`Transfer.download` saves text on the user's computer under a file name (the
  browser's usual download);
- its "Upload" button opens a file dialog; the chosen file is read as text in the browser
  and handed to the callbacks registered with :meth:`Transfer.on_upload` as
  ``callback(name, text)``.

Files larger than :data:`MAX_UPLOAD_BYTES` (8 MiB, the size a trace or schedule file may
have) are refused twice: in the browser before they are read, and again here. A refused
file calls the :meth:`Transfer.on_error` callbacks instead; nothing else happens.

The Python side is plain logic: tests call :meth:`Transfer.handle_message` with the
message the front end would send, and look at what :meth:`Transfer.download` sends.

>>> t = Transfer()
>>> got = []
>>> t.on_upload(lambda name, text: got.append((name, text)))
>>> t.handle_message({"type": "wb-upload", "name": "t.json", "text": "[[], []]"})
True
>>> got
[('t.json', '[[], []]')]
>>> t.download("mm.trace.json", "[[], []]")["name"]
'mm.trace.json'
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..schedule.limits import MAX_TEXT_BYTES
from .wording import count

__all__ = ["MAX_UPLOAD_BYTES", "Transfer", "TransferError", "safe_file_name"]

#: The largest file the upload accepts (bytes of UTF-8 text): what a loader reads.
MAX_UPLOAD_BYTES = MAX_TEXT_BYTES

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TransferError(ValueError):
    """An upload that was refused (too large, not text), or a bad download name."""


def safe_file_name(name: str, default: str = "download.txt") -> str:
    """A file name for a download: the last path part, odd characters replaced by ``_``.

    >>> safe_file_name("../my func/mm.trace.json")
    'mm.trace.json'
    >>> safe_file_name("mm relu.json")
    'mm_relu.json'
    """
    base = str(name).replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip("._") or default
    return base[:200]


class Transfer(anywidget.AnyWidget):
    """Download text to the user's computer; upload text files from it.

    ``label`` is the upload button's text, ``accept`` the file types the dialog offers
    (``".json,.py,.txt"``). The widget's element has the classes ``wb-transfer`` and
    ``wb-upload`` and holds the button and a hidden ``input[type=file]``.
    """

    _esm = Path(__file__).parent / "static" / "transfer.js"

    label = traitlets.Unicode("Upload").tag(sync=True)
    button_tooltip = traitlets.Unicode("Open a file from your computer").tag(sync=True)
    accept = traitlets.Unicode(".json,.py,.txt").tag(sync=True)
    max_bytes = traitlets.Int(MAX_UPLOAD_BYTES).tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_class("wb-transfer")
        self.add_class("wb-upload")
        self._upload_callbacks: list[Callable[[str, str], Any]] = []
        self._error_callbacks: list[Callable[[TransferError], Any]] = []
        self.on_msg(self._on_msg)

    def __repr__(self) -> str:
        return f"Transfer(label={self.label!r})"

    # ------------------------------------------------------------------ download
    def download(self, name: str, text: str) -> dict[str, str]:
        """Save ``text`` on the user's computer as ``name`` (the browser's download).

        Returns the message sent to the front end. Nothing happens in a browser where
        the widget is not displayed.
        """
        if not isinstance(text, str):
            raise TypeError(f"download: expected text, got {type(text).__name__}")
        message = {"type": "wb-download", "id": uuid.uuid4().hex,
                   "name": safe_file_name(name), "text": text}
        self.send(message)
        return message

    # ------------------------------------------------------------------ upload
    def on_upload(self, callback: Callable[[str, str], Any]) -> None:
        """Call ``callback(name, text)`` with each uploaded file."""
        self._upload_callbacks.append(callback)

    def on_error(self, callback: Callable[[TransferError], Any]) -> None:
        """Call ``callback(error)`` when an upload is refused."""
        self._error_callbacks.append(callback)

    def upload(self, name: str, text: str | bytes) -> bool:
        """Hand ``text`` to the upload callbacks as if the file ``name`` was uploaded
        (what the button does). A refused file calls the error callbacks instead and
        returns False."""
        try:
            if isinstance(text, (bytes, bytearray)):
                size = len(text)
                if size > self.max_bytes:
                    raise self._too_large(name, size)
                try:
                    text = bytes(text).decode("utf-8")
                except UnicodeDecodeError:
                    raise TransferError(f"upload: {name} is not UTF-8 text") from None
            if not isinstance(text, str):
                raise TransferError(f"upload: {name}: expected text, got {type(text).__name__}")
            size = len(text.encode("utf-8", errors="replace"))
            if size > self.max_bytes:
                raise self._too_large(name, size)
        except TransferError as e:
            self._refused(e)
            return False
        for callback in list(self._upload_callbacks):
            callback(str(name), text)
        return True

    def _too_large(self, name: str, size: int) -> TransferError:
        return TransferError(
            f"upload: {name} is {_size(size)}, more than the {_size(self.max_bytes)} a "
            "trace or schedule file may have; nothing was loaded")

    def _refused(self, error: TransferError) -> None:
        for callback in list(self._error_callbacks):
            callback(error)

    # ------------------------------------------------------------------ messages
    def handle_message(self, content: Any) -> bool:
        """Act on a message from the front end: ``{"type": "wb-upload", "name", "text"}``
        or ``{"type": "wb-upload-error", "name", "size"}`` (a file the browser refused).
        Returns whether a file was handed on."""
        if not isinstance(content, dict):
            return False
        kind = content.get("type")
        name = str(content.get("name") or "the file")[:200]
        if kind == "wb-upload":
            return self.upload(name, content.get("text"))
        if kind == "wb-upload-error":
            size = content.get("size")
            if isinstance(size, int) and size > self.max_bytes:
                self._refused(self._too_large(name, size))
            else:
                reason = str(content.get("reason") or "the browser could not read it")[:300]
                self._refused(TransferError(f"upload: {name}: {reason}"))
        return False

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        self.handle_message(content)


def _size(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return count(n, "byte")
