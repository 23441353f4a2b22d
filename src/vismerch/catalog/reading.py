"""Reading an image file safely: regular files only, inside the catalog's folder, never
more than a byte cap.

``check_image_file`` judges a path from its metadata alone (the plan calls it, so a FIFO
is never opened and a link out of the folder never read); ``read_image_file`` is the one
read the pipeline does, and checks again on the open file (a file swapped or grown after
planning is refused, not read without bound). Refusals carry a stable reason code:

- ``outside-folder``: a symbolic link that leads out of the source folder;
- ``not-a-file``: a FIFO, device, socket or directory;
- ``too-large``: more bytes than the ``max_image_bytes`` setting.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vismerch.errors import DecodeError

OUTSIDE_FOLDER = "outside-folder"
NOT_A_FILE = "not-a-file"
TOO_LARGE = "too-large"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class FileRefused(DecodeError):
    """An image file refused before its bytes were read (``reason`` is one of the codes above)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _too_large(path: str | os.PathLike, size: int, max_bytes: int) -> FileRefused:
    return FileRefused(TOO_LARGE, f"{path} is {size:,} bytes, over max_image_bytes ({max_bytes:,})")


class FolderGuard:
    """Whether paths really lie inside ``root`` once symbolic links are followed. The real
    location of each directory is resolved once (``os.path.realpath`` walks every
    component: two calls per file cost ~65 us, most of planning a large folder); a file
    that is not itself a link lies where its directory really is."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._real_root = os.path.realpath(root)
        # inside = the root itself or below "root/" (not "root2/...": parts, not characters)
        self._inside_prefix = (self._real_root if self._real_root.endswith(os.sep)
                               else self._real_root + os.sep)
        self._dirs: dict[str, str] = {}

    def real(self, path: str | os.PathLike) -> Path:
        """The real location of ``path`` (same as ``os.path.realpath``)."""
        return Path(self._real_text(path))

    def _real_text(self, path: str | os.PathLike) -> str:
        """``real`` as a string: planning a large folder asks for every file's, and Path
        objects cost more than the lookups (~30 -> ~10 us a file)."""
        text = os.fspath(path)
        if ".." in text.split(os.sep):  # "link/.." is not "": only realpath knows where it leads
            return os.path.realpath(text)
        head, name = os.path.split(os.path.abspath(text))
        real_dir = self._dirs.get(head)
        if real_dir is None:
            real_dir = self._dirs[head] = os.path.realpath(head)
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            is_link = True  # let realpath say what it is
        return os.path.realpath(text) if is_link or not name else os.path.join(real_dir, name)

    def outside(self, path: str | os.PathLike) -> FileRefused | None:
        real = self._real_text(path)
        if real.startswith(self._inside_prefix) or real == self._real_root:
            return None
        return FileRefused(OUTSIDE_FOLDER, f"{path} is a link to {real}, outside {self.root}")


def check_image_file(path: str | os.PathLike, st: os.stat_result, folder: FolderGuard | None,
                     max_bytes: int | None) -> FileRefused | None:
    """Why ``path`` (whose ``os.stat`` is ``st``) must not be read, or None. ``folder``: the
    guard of the folder the catalog came from (one for all its files); a path whose real
    location is outside it is refused."""
    if folder is not None:
        problem = folder.outside(path)
        if problem is not None:
            return problem
    if not stat.S_ISREG(st.st_mode):
        return FileRefused(NOT_A_FILE, f"{path} is {_kind(st.st_mode)}, not an image file")
    if max_bytes and st.st_size > max_bytes:
        return _too_large(path, st.st_size, max_bytes)
    return None


def read_image_file(path: str | os.PathLike, max_bytes: int | None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes; FileRefused otherwise.
    Opened non-blocking (a FIFO put in place after planning cannot hang the worker) and
    read with a cap (a file that grows past it is refused, not read to the end)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(NOT_A_FILE, f"{path} is {_kind(st.st_mode)}, not an image file")
        if max_bytes and st.st_size > max_bytes:
            raise _too_large(path, st.st_size, max_bytes)
        limit = max_bytes + 1 if max_bytes else -1
        data = fh.readall() if limit < 0 else _read_upto(fh, limit)
    if max_bytes and len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes)
    return data


def _read_upto(fh, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
