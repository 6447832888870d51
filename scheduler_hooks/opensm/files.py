"""Durable file operations: atomic replace (temp + fsync + rename + directory fsync), hashes, backups."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o644


def sha256(path: Path) -> str | None:
    """The file's sha256 (hex), None when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def text_sha256(text: str) -> str:
    """sha256 of the UTF-8 text."""
    return hashlib.sha256(text.encode()).hexdigest()


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new name in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, like: Path | None = None) -> None:
    """Replace `path` with `data` atomically; keep the mode (and owner when allowed) of `like` or `path`."""
    reference = like if like is not None and like.exists() else path
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".ibpool-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if reference.exists():
            stat = reference.stat()
            os.chmod(temp, stat.st_mode & 0o7777)
            with contextlib.suppress(PermissionError):
                os.chown(temp, stat.st_uid, stat.st_gid)
        else:
            os.chmod(temp, NEW_FILE_MODE)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_dir(path.parent)


def copy_durably(source: Path, destination: Path) -> None:
    """Copy `source` to `destination` (atomically, fsynced), keeping its mode."""
    atomic_write(destination, source.read_bytes(), like=source)
    shutil.copymode(source, destination)


def remove_durably(path: Path) -> None:
    """Delete `path` (if present) and make that durable."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_dir(path.parent)
