"""ibsim's console: commands written to its stdin FIFO in one write, replies read back from its log.

ibsim reads console commands from stdin (a FIFO it holds open read-write) and prints replies to its
stdout (the log) after a `sim> ` prompt; it echoes comment lines, so a unique comment after a batch marks
where the batch's replies end. A console line is at most 127 bytes (ibsim reads into a 128-byte buffer).
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from simulator.backends.errors import ConsoleError

MAX_LINE = 127
_numbers = itertools.count(1)


class Console(Protocol):
    """Something that runs a batch of ibsim console commands and returns what ibsim printed for them."""

    def run(self, commands: Sequence[str]) -> str:
        """Run `commands` in order; the reply text, prompts removed."""
        ...


class IbsimConsole:
    """The console of an ibsim started with `ibsim -s NET 0<>FIFO > LOG`."""

    def __init__(self, fifo: Path, log: Path, timeout_seconds: float = 10.0) -> None:
        self.fifo = Path(fifo)
        self.log = Path(log)
        self.timeout_seconds = timeout_seconds
        self._tag = uuid.uuid4().hex[:8]

    def run(self, commands: Sequence[str]) -> str:
        """Write every command and an end marker in one write; wait for the marker; return the replies."""
        for command in commands:
            if "\n" in command or len(command.encode()) > MAX_LINE:
                raise ConsoleError(f"not one console line of at most {MAX_LINE} bytes: {command[:80]!r}")
        marker = f"# ibpool-backend-{self._tag}-{next(_numbers)}"
        start = self._size()
        self._write(("\n".join([*commands, marker]) + "\n").encode())
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            text = self._read_from(start)
            found = text.find(marker)
            if found >= 0:
                return text[:found].replace("sim> ", "").strip()
            if time.monotonic() > deadline:
                raise ConsoleError(
                    f"ibsim did not answer {len(commands)} commands in {self.timeout_seconds:g} s"
                )
            time.sleep(0.005)

    def _write(self, data: bytes) -> None:
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: nobody reads the FIFO (ibsim is not running)
            raise ConsoleError(f"cannot open ibsim's console {self.fifo}: {exc.strerror or exc}") from None
        try:
            os.set_blocking(fd, True)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def _size(self) -> int:
        try:
            return self.log.stat().st_size
        except FileNotFoundError:
            return 0

    def _read_from(self, offset: int) -> str:
        try:
            with self.log.open("rb") as handle:
                handle.seek(offset)
                return handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
