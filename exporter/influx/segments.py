"""The spill queue's segment files: a sequence of records, each a 16-byte header and a payload.

Header (little-endian): magic `IBPS`, payload length, points in the payload, CRC-32 of the payload.
`scan` checks the headers (not the payloads) of a segment and stops at the first record that is cut off or
has a bad magic, which is what a crash in the middle of an append leaves; the payload's CRC is checked when
the record is read back.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"IBPS"
HEADER = struct.Struct("<4sIII")
SUFFIX = ".seg"


@dataclass(frozen=True)
class RecordRef:
    """Where one record lies in its segment: header offset, payload length, points."""

    offset: int
    length: int
    points: int

    @property
    def end(self) -> int:
        """Offset just past the record."""
        return self.offset + HEADER.size + self.length


@dataclass(frozen=True)
class ScanResult:
    """The intact records of a segment; `good_size` is where the first damaged byte starts."""

    records: list[RecordRef]
    good_size: int
    file_size: int
    lost_points: int  # points named by a damaged record's header, when the header itself is intact

    @property
    def damaged(self) -> bool:
        """True when the file holds bytes past its last intact record."""
        return self.good_size < self.file_size


def segment_name(seq: int) -> str:
    """File name of segment `seq` (zero-padded so names sort as numbers)."""
    return f"{seq:020d}{SUFFIX}"


def segment_seq(path: Path) -> int | None:
    """The sequence number in a segment file name, or None for any other file."""
    stem = path.name.removesuffix(SUFFIX)
    return int(stem) if path.name.endswith(SUFFIX) and stem.isdigit() else None


def encode_record(payload: bytes, points: int) -> bytes:
    """Header and payload of one record."""
    return HEADER.pack(MAGIC, len(payload), points, zlib.crc32(payload)) + payload


def scan(path: Path) -> ScanResult:
    """Index the records of a segment file, stopping at the first damaged one."""
    records: list[RecordRef] = []
    lost = 0
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size:
            header = f.read(HEADER.size)
            if len(header) < HEADER.size:
                break
            magic, length, points, _ = HEADER.unpack(header)
            if magic != MAGIC:
                break
            if offset + HEADER.size + length > size:
                lost = points
                break
            records.append(RecordRef(offset, length, points))
            offset += HEADER.size + length
            f.seek(offset)
    return ScanResult(records, offset, size, lost)


def read_payload(fd: int, ref: RecordRef) -> bytes | None:
    """The payload of `ref`, or None when it is short or fails its CRC."""
    header = os.pread(fd, HEADER.size, ref.offset)
    payload = os.pread(fd, ref.length, ref.offset + HEADER.size)
    if len(header) < HEADER.size or len(payload) != ref.length:
        return None
    magic, length, _, crc = HEADER.unpack(header)
    if magic != MAGIC or length != ref.length or zlib.crc32(payload) != crc:
        return None
    return payload
