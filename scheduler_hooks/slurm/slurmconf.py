"""Keeps slurm.conf in step with a partition change: edit `Nodes=` of `PartitionName=` lines, nothing else.

The file is written atomically (temporary file, fsync, rename) after its current version is copied to
the backup path; restoring puts the backup back only while the file is still the one we wrote.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from foundation.hostlist import compress_hostlist, expand_hostlist
from scheduler_hooks.errors import SlurmConfError

log = logging.getLogger(__name__)

_PARTITION = re.compile(r'^\s*PartitionName=("[^"]*"|\S+)', re.IGNORECASE)
_NODES = re.compile(r'(\s+)Nodes=("[^"]*"|\S*)', re.IGNORECASE)
_COMMENT = re.compile(r"(?<!\\)#")


@dataclass(frozen=True)
class _Line:
    """A `PartitionName=` line: where it is and where its key-value part ends (before any comment)."""

    index: int
    partition: str
    body_end: int
    continued: bool


def _partition_lines(lines: Sequence[str]) -> list[_Line]:
    found: list[_Line] = []
    continued = False
    for index, line in enumerate(lines):
        text = line.rstrip("\r\n")
        comment = _COMMENT.search(text)
        body_end = comment.start() if comment else len(text)
        match = _PARTITION.match(text[:body_end])
        ends_continued = text[:body_end].rstrip().endswith("\\")
        if match and not continued:
            name = match.group(1).strip('"')
            if name.upper() != "DEFAULT":
                found.append(_Line(index, name, body_end, ends_continued))
        continued = ends_continued
    return found


def check_editable(text: str, partitions: Sequence[str]) -> list[str]:
    """Why the `PartitionName=` line of each of `partitions` cannot be edited in place (empty: all can)."""
    lines = _partition_lines(text.splitlines(keepends=True))
    problems: list[str] = []
    for partition in partitions:
        mine = [line for line in lines if line.partition == partition]
        if not mine:
            problems.append(f"partition {partition} has no PartitionName line in slurm.conf (an Include?)")
        elif len(mine) > 1:
            lines_at = ", ".join(str(line.index + 1) for line in mine)
            problems.append(f"partition {partition} is defined on several slurm.conf lines ({lines_at})")
        elif mine[0].continued:
            problems.append(f"partition {partition}: slurm.conf line {mine[0].index + 1} continues with '\\'")
    return problems


def set_partition_nodes(text: str, nodes: Mapping[str, Sequence[str]]) -> str:
    """`text` with the `Nodes=` of each partition's line set to its nodes (a host list); all else kept."""
    problems = check_editable(text, list(nodes))
    if problems:
        raise SlurmConfError("; ".join(problems))
    lines = text.splitlines(keepends=True)
    for line in _partition_lines(lines):
        if line.partition not in nodes:
            continue
        old = lines[line.index]
        body, rest = old[: line.body_end], old[line.body_end :]
        listed = compress_hostlist(nodes[line.partition])
        match = _NODES.search(body)
        if match is None and listed:
            head = _PARTITION.match(body)
            assert head is not None  # _partition_lines matched it
            body = f"{body[: head.end()]} Nodes={listed}{body[head.end() :]}"
        elif match is not None:
            replacement = f"{match.group(1)}Nodes={listed}" if listed else ""
            body = body[: match.start()] + replacement + body[match.end() :]
        lines[line.index] = body + rest
    return "".join(lines)


def partition_nodes(text: str) -> dict[str, tuple[str, ...]]:
    """Partition -> nodes as slurm.conf's `PartitionName=` lines list them (for checks and tests)."""
    out: dict[str, tuple[str, ...]] = {}
    lines = text.splitlines()
    for line in _partition_lines(lines):
        match = _NODES.search(lines[line.index][: line.body_end])
        value = match.group(2).strip('"') if match else ""
        try:
            out[line.partition] = tuple(expand_hostlist(value))
        except ValueError as exc:
            raise SlurmConfError(f"slurm.conf line {line.index + 1}: {exc}") from None
    return out


def sha256(data: bytes) -> str:
    """Hex digest of `data`."""
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename (same directory, same mode, flushed to disk)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class SlurmConfFile:
    """slurm.conf and the backup of its previous version."""

    def __init__(self, path: Path, backup: Path) -> None:
        self.path = path
        self.backup = backup

    def read(self) -> str:
        """The file's text (bytes that are not UTF-8 survive a round trip)."""
        try:
            return self.path.read_bytes().decode("utf-8", "surrogateescape")
        except OSError as exc:
            raise SlurmConfError(f"cannot read {self.path}: {exc.strerror or exc}") from None

    def check(self, partitions: Sequence[str]) -> list[str]:
        """Why the partitions' lines cannot be edited (empty when they can)."""
        return check_editable(self.read(), partitions)

    def update(self, nodes: Mapping[str, Sequence[str]]) -> dict[str, object]:
        """Set the partitions' node lists in the file, keeping the previous version; what was done."""
        previous = self.read()
        written = set_partition_nodes(previous, nodes)
        old_bytes = previous.encode("utf-8", "surrogateescape")
        new_bytes = written.encode("utf-8", "surrogateescape")
        detail: dict[str, object] = {
            "path": str(self.path),
            "backup": str(self.backup),
            "previous_sha256": sha256(old_bytes),
            "written_sha256": sha256(new_bytes),
            "unchanged": old_bytes == new_bytes,
        }
        if old_bytes != new_bytes:
            try:
                write_atomic(self.backup, old_bytes)
                write_atomic(self.path, new_bytes)
            except OSError as exc:
                raise SlurmConfError(f"cannot write {self.path}: {exc.strerror or exc}") from None
            log.info(
                "%s: partitions %s rewritten, previous version in %s", self.path, sorted(nodes), self.backup
            )
        return detail

    def restore(self, detail: Mapping[str, object], nodes: Mapping[str, Sequence[str]]) -> str:
        """Undo `update`: the backup goes back while the file is still the one written (per `detail`);
        otherwise the partitions' lines are re-edited to `nodes`. Returns "backup", "edited" or "unchanged".
        """
        current = self.read().encode("utf-8", "surrogateescape")
        try:
            backup = self.backup.read_bytes()
        except OSError:
            backup = b""
        ours = sha256(current) == detail.get("written_sha256") and not detail.get("unchanged")
        try:
            if ours and sha256(backup) == detail.get("previous_sha256"):
                write_atomic(self.path, backup)
                return "backup"
            edited = set_partition_nodes(current.decode("utf-8", "surrogateescape"), nodes)
            data = edited.encode("utf-8", "surrogateescape")
            if data == current:
                return "unchanged"
            log.warning(
                "%s: re-editing partitions %s back (not the file ibpool wrote)", self.path, sorted(nodes)
            )
            write_atomic(self.path, data)
        except OSError as exc:
            raise SlurmConfError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        return "edited"
