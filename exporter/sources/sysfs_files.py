"""sysfs files kept open between scrapes: safe opening, file identity, directory change checks, error counts.

Rules: a file is opened with O_NONBLOCK and kept only when fstat says it is a regular file, so a FIFO or a
device node in the tree is skipped (`not_a_file`) instead of blocking a scrape. An open file stays the
same file while its (st_dev, st_ino) does; after a failed or bad read the path is checked again and a
replaced file reopened. Every skipped value is counted by reason and logged once per path.
Design notes (costs, the two change-detection modes): docs/node-exporter.md.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import stat
from collections.abc import Mapping

from exporter.sources.ib_values import WIDEST, parse_counter

log = logging.getLogger(__name__)

READ_ERROR_REASONS = (
    "missing",
    "unreadable",
    "not_available",
    "garbage",
    "not_a_file",
    "empty",
    "out_of_range",
)
READ_SIZE = 64
STATIC_READ_SIZE = 4096
GONE_ERRNOS = frozenset({errno.ENODEV, errno.ENOENT, errno.ENXIO})
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
_RACY_SLACK_NS = 50_000_000  # a directory mtime this close to our listing may hide a later change
_FD_LIMIT_CAP = 1 << 20

FileId = tuple[int, int]  # (st_dev, st_ino)


class NotRegularFileError(OSError):
    """The path is a directory, FIFO, socket or device node, not a file with a value."""


class FileGoneError(Exception):
    """A file answered ENODEV/ENOENT: its device went away mid-scrape."""


def file_id(st: os.stat_result) -> FileId:
    """What identifies a file: its device and inode."""
    return st.st_dev, st.st_ino


def open_regular(path: str) -> tuple[int, FileId]:
    """Open `path` without ever blocking; NotRegularFileError (fd closed) unless it is a regular file."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
    return fd, file_id(st)


def os_reason(exc: OSError) -> str:
    """The read-error reason of a failed open or read."""
    if isinstance(exc, NotRegularFileError) or exc.errno == errno.EISDIR:
        return "not_a_file"
    return "missing" if exc.errno in GONE_ERRNOS else "unreadable"


def list_dir(path: str) -> dict[str, os.DirEntry[str]]:
    """The entries of a directory by name (d_ino and d_type come free with them)."""
    with os.scandir(path) as entries:
        return {e.name: e for e in entries}


def close_fd(fd: int) -> None:
    """Close, ignoring errors (the fd is dropped either way)."""
    with contextlib.suppress(OSError):
        os.close(fd)


def raise_fd_limit() -> bool:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; True when it went up."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _FD_LIMIT_CAP
    if soft != resource.RLIM_INFINITY and soft >= target:
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return False
    log.info("raised the open-file limit from %d to %d", soft, target)
    return True


class DirWatch:
    """Whether a directory must be listed again: its identity or mtime changed, or its mtime is racy."""

    __slots__ = ("clean", "ident", "mtime")

    def __init__(self) -> None:
        self.ident: tuple[int, int] = (-1, -1)
        self.mtime = -1
        self.clean = False

    def changed(self, path: str) -> bool:
        """Stat `path`; True when it must be listed again (or is gone)."""
        try:
            st = os.stat(path)
        except OSError:
            return True
        return not (self.clean and file_id(st) == self.ident and st.st_mtime_ns == self.mtime)

    def listed(self, path: str, started_ns: int) -> None:
        """Record the directory's stamp after a listing that began at `started_ns`."""
        try:
            st = os.stat(path)
        except OSError:
            self.clean = False
            return
        self.ident, self.mtime = file_id(st), st.st_mtime_ns
        self.clean = st.st_mtime_ns < started_ns - _RACY_SLACK_NS


class FileAccess:
    """Opens and reads files for one source, and counts what it had to skip (not thread-safe)."""

    def __init__(self) -> None:
        self._errors = dict.fromkeys(READ_ERROR_REASONS, 0)
        self._warned: set[str] = set()
        self._fd_limit_hit = False

    def errors(self) -> dict[str, int]:
        """Values skipped since start, by reason (every reason present, zero included)."""
        return dict(self._errors)

    def count(self, reason: str, path: str, exc: OSError | None = None) -> None:
        """One value skipped: counted, logged as a warning the first time for `path`, at debug after."""
        self._errors[reason] = self._errors.get(reason, 0) + 1
        detail = reason if exc is None else f"{reason} ({exc.strerror})"
        if path not in self._warned:
            self._warned.add(path)
            log.warning("skipping %s: %s", path, detail)
        else:
            log.debug("skipping %s: %s", path, detail)

    def warn_once(self, path: str, exc: OSError) -> None:
        """Log a failure to open or list `path`, once."""
        if path not in self._warned:
            self._warned.add(path)
            log.warning("cannot open %s: %s", path, exc.strerror)

    def read_failed(self, path: str, exc: OSError) -> None:
        """A read of an open fd failed: count it; raise FileGoneError when the file vanished (ENODEV)."""
        if exc.errno in GONE_ERRNOS or exc.errno == errno.EBADF:
            self.count("missing", path, exc)
            raise FileGoneError(path) from exc
        self.count(os_reason(exc), path, exc)

    def open(self, path: str) -> tuple[int, FileId] | str:
        """An fd and the file's identity, or the reason there is none ("unpinned": out of fds)."""
        try:
            return open_regular(path)
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                return self._open_short_of_fds(path)
            if not isinstance(exc, NotRegularFileError):
                self.warn_once(path, exc)
            return os_reason(exc)

    def _open_short_of_fds(self, path: str) -> tuple[int, FileId] | str:
        """EMFILE: raise the soft fd limit to the hard one (once, as Go does) and retry; else unpinned."""
        if not self._fd_limit_hit:
            self._fd_limit_hit = True
            if raise_fd_limit():
                with contextlib.suppress(OSError):
                    return open_regular(path)
            log.warning("out of file descriptors: reading %s and later files by path", path)
        return "unpinned"

    def read_by_path(self, path: str) -> bytes | None:
        """Open, read, close; None (counted) when that fails."""
        return self._read_once(path, READ_SIZE, count_missing=True)

    def read_static(self, path: str, optional: bool) -> str | None:
        """A static text file, read once; None when absent (counted unless `optional`) or unreadable."""
        raw = self._read_once(path, STATIC_READ_SIZE, count_missing=not optional)
        return None if raw is None else raw.decode("utf-8", "replace").strip()

    def _read_once(self, path: str, size: int, count_missing: bool) -> bytes | None:
        try:
            fd, _ = open_regular(path)
        except FileNotFoundError:
            if count_missing:
                self.count("missing", path)
            return None
        except OSError as exc:
            self.count(os_reason(exc), path, exc)
            return None
        try:
            return os.pread(fd, size, 0)
        except OSError as exc:
            self.count(os_reason(exc), path, exc)
            return None
        finally:
            os.close(fd)


class PinnedFiles:
    """The open files of one directory: every file in it but `excluded`, or just the `wanted` ones.

    `limits` bounds each numeric file (others: 64 bits). `refresh` takes a new listing and reopens only
    what changed; `read_numbers` is the hot path (one pread and one int() per file).
    """

    __slots__ = (
        "bad",
        "excluded",
        "fds",
        "good",
        "ident",
        "ids",
        "limits",
        "path",
        "unpinned",
        "wanted",
        "watch",
    )

    def __init__(
        self,
        path: str,
        ident: int = -1,
        *,
        wanted: tuple[str, ...] | None = None,
        excluded: frozenset[str] = frozenset(),
        limits: Mapping[str, int] | None = None,
    ) -> None:
        self.path = path
        self.ident = ident  # the directory's d_ino as its parent lists it
        self.wanted = wanted
        self.excluded = excluded
        self.limits: Mapping[str, int] = limits or {}
        self.good: list[tuple[str, int, int]] = []  # (file name, fd, largest value), sorted by name
        self.fds: dict[str, int] = {}
        self.ids: dict[str, tuple[int, FileId]] = {}  # name -> (d_ino when opened, (st_dev, st_ino))
        self.unpinned: list[str] = []  # no fd to spare (EMFILE): read by path
        self.bad: dict[str, str] = {}  # name -> why it cannot be opened
        self.watch = DirWatch()

    def open_count(self) -> int:
        """How many fds are held."""
        return len(self.fds)

    def close(self) -> None:
        """Close every fd."""
        for fd in self.fds.values():
            close_fd(fd)
        self.fds, self.good, self.ids = {}, [], {}

    def refresh(self, entries: Mapping[str, os.DirEntry[str]], access: FileAccess) -> None:
        """Match the open files to a new listing: keep the unchanged, reopen the replaced, drop the gone."""
        if self.wanted is not None:
            names = list(self.wanted)
        else:
            names = sorted(n for n in entries if n not in self.excluded)
        old = self.fds
        self.fds, self.unpinned, self.bad = {}, [], {}
        for name in names:
            entry = entries.get(name)
            if entry is None:
                self.bad[name] = "missing"
                continue
            fd = old.pop(name, None)
            if fd is not None and self._unchanged(entry, self.ids.get(name)):
                self.fds[name] = fd
                continue
            if fd is not None:
                close_fd(fd)
            self._open(name, entry.path, entry.inode(), access)
        for fd in old.values():
            close_fd(fd)
        self._rebuild()

    @staticmethod
    def _unchanged(entry: os.DirEntry[str], known: tuple[int, FileId] | None) -> bool:
        if known is None or entry.inode() != known[0]:
            return False
        try:
            return file_id(entry.stat()) == known[1]
        except OSError:
            return False

    def _open(self, name: str, path: str, d_ino: int | None, access: FileAccess) -> None:
        """Open one file into fds, unpinned or bad; `d_ino` None: not listed, take the inode for it."""
        opened = access.open(path)
        if isinstance(opened, tuple):
            self.fds[name] = opened[0]
            self.ids[name] = (opened[1][1] if d_ino is None else d_ino, opened[1])
        elif opened == "unpinned":
            self.unpinned.append(name)
        else:
            self.bad[name] = opened

    def _rebuild(self) -> None:
        limits = self.limits
        self.ids = {name: known for name, known in self.ids.items() if name in self.fds}
        self.good = [(name, fd, limits.get(name, WIDEST)) for name, fd in sorted(self.fds.items())]

    def reopen_if_replaced(self, name: str, access: FileAccess) -> bool:
        """After a bad read: True when `name` now is another file than the fd's, which is reopened."""
        path = os.path.join(self.path, name)
        try:
            st = os.stat(path)
        except OSError:
            return False
        known = self.ids.get(name)
        if known is not None and file_id(st) == known[1]:
            return False
        old = self.fds.pop(name, None)
        if old is not None:
            close_fd(old)
        self.ids.pop(name, None)
        self.unpinned = [n for n in self.unpinned if n != name]
        self.bad.pop(name, None)
        self._open(name, path, None, access)
        self._rebuild()
        return True

    def read(self, name: str, access: FileAccess) -> bytes | None:
        """The raw content of one file; None (counted) when it cannot be read."""
        fd = self.fds.get(name)
        if fd is not None:
            try:
                return os.pread(fd, READ_SIZE, 0)
            except OSError as exc:
                if exc.errno in GONE_ERRNOS or not self.reopen_if_replaced(name, access):
                    access.read_failed(os.path.join(self.path, name), exc)
                    return None
            fd = self.fds.get(name)
            if fd is not None:
                try:
                    return os.pread(fd, READ_SIZE, 0)
                except OSError as exc:
                    access.read_failed(os.path.join(self.path, name), exc)
                    return None
        if self._retry(name, access):
            return self.read(name, access)
        if name in self.unpinned:
            return access.read_by_path(os.path.join(self.path, name))
        access.count(self.bad.get(name, "missing"), os.path.join(self.path, name))
        return None

    def _retry(self, name: str, access: FileAccess) -> bool:
        """Try again to open a file that could not be opened; True when it is open now."""
        if name not in self.bad:
            return False
        del self.bad[name]
        self._open(name, os.path.join(self.path, name), None, access)
        if name not in self.fds:
            return False
        self._rebuild()
        return True

    def read_numbers(self, out: dict[str, int], access: FileAccess) -> None:
        """Every counter into `out`; a read that fails or a value out of range takes the slow path."""
        pread = os.pread
        for name, fd, limit in self.good:
            try:
                raw = pread(fd, READ_SIZE, 0)
            except OSError as exc:
                self._read_failed(name, exc, out, access)
                continue
            try:
                value = int(raw)
            except ValueError:
                value = -1
            if 0 <= value <= limit:
                out[name] = value
            else:
                self._bad_value(name, raw, out, access)
        if self.bad or self.unpinned:
            self._read_rest(out, access)

    def _read_failed(self, name: str, exc: OSError, out: dict[str, int], access: FileAccess) -> None:
        path = os.path.join(self.path, name)
        if exc.errno in GONE_ERRNOS or not self.reopen_if_replaced(name, access):
            access.read_failed(path, exc)
        else:
            self._read_reopened(name, out, access)

    def _bad_value(self, name: str, raw: bytes, out: dict[str, int], access: FileAccess) -> None:
        if self.reopen_if_replaced(name, access):
            self._read_reopened(name, out, access)
            return
        self._judge(name, raw, out, access)

    def _read_reopened(self, name: str, out: dict[str, int], access: FileAccess) -> None:
        fd = self.fds.get(name)
        if fd is None:
            return  # reopening failed: now in bad or unpinned, which _read_rest handles
        try:
            raw = os.pread(fd, READ_SIZE, 0)
        except OSError as exc:
            access.read_failed(os.path.join(self.path, name), exc)
            return
        self._judge(name, raw, out, access)

    def _judge(self, name: str, raw: bytes, out: dict[str, int], access: FileAccess) -> None:
        parsed = parse_counter(raw, self.limits.get(name, WIDEST))
        if isinstance(parsed, int):
            out[name] = parsed
        else:
            access.count(parsed, os.path.join(self.path, name))

    def _read_rest(self, out: dict[str, int], access: FileAccess) -> None:
        for name in list(self.bad):
            if self._retry(name, access):
                self._read_reopened(name, out, access)
            elif name in self.bad:
                access.count(self.bad[name], os.path.join(self.path, name))
        for name in self.unpinned:
            raw = access.read_by_path(os.path.join(self.path, name))
            if raw is not None:
                self._judge(name, raw, out, access)
