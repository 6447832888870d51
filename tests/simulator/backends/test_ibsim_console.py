"""IbsimConsole against a stand-in that reads the FIFO and answers in the log the way ibsim does."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.backends.errors import ConsoleError
from simulator.backends.ibsim_console import IbsimConsole


class FakeIbsim:
    """Reads console lines from a FIFO (held read-write, as `0<>fifo`), prints replies after `sim> `."""

    def __init__(self, root: Path, answer: bool = True) -> None:
        self.fifo, self.log = root / "ibsim.fifo", root / "ibsim.log"
        os.mkfifo(self.fifo)
        self.log.write_text("Network simulator ready\n")
        self.answer = answer
        self.lines: list[str] = []
        self._fd = os.open(self.fifo, os.O_RDWR)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._fd, 65536)
            if not chunk or chunk == b"\0":
                return
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            with self.log.open("a") as out:
                for raw in complete:
                    line = raw.decode()
                    self.lines.append(line)
                    if self.answer:
                        out.write(f"sim> {line}" if line.startswith("#") else f"sim> did {line}\n")

    def close(self) -> None:
        os.write(self._fd, b"\0")
        self._thread.join(5)
        os.close(self._fd)


@pytest.fixture
def ibsim(tmp_path: Path) -> Iterator[FakeIbsim]:
    fake = FakeIbsim(tmp_path)
    yield fake
    fake.close()


def test_a_batch_is_written_at_once_and_its_replies_come_back(ibsim: FakeIbsim) -> None:
    console = IbsimConsole(ibsim.fifo, ibsim.log)
    commands = [f'PerformanceSet "leaf001"[{p}] PortCounters.PortXmitWait={p}' for p in range(1, 2000)]
    reply = console.run(commands)
    assert reply.splitlines()[0] == 'did PerformanceSet "leaf001"[1] PortCounters.PortXmitWait=1'
    assert len(reply.splitlines()) == 1999 and "sim>" not in reply
    assert ibsim.lines[-1].startswith("# ibpool-backend-")  # the end marker
    assert console.run(['Unlink "leaf001"[2]']) == 'did Unlink "leaf001"[2]'  # only this batch's replies


def test_lines_ibsim_cannot_read_are_refused(ibsim: FakeIbsim) -> None:
    console = IbsimConsole(ibsim.fifo, ibsim.log)
    with pytest.raises(ConsoleError, match="127 bytes"):
        console.run(["x" * 128])
    with pytest.raises(ConsoleError, match="127 bytes"):
        console.run(["a\nb"])
    assert ibsim.lines == []


def test_no_reader_and_no_answer_are_errors(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConsoleError, match="cannot open"):
        IbsimConsole(tmp_path / "fifo", tmp_path / "log").run(["Dump"])
    (tmp_path / "quiet").mkdir()
    silent = FakeIbsim(tmp_path / "quiet", answer=False)
    try:
        with pytest.raises(ConsoleError, match="did not answer"):
            IbsimConsole(silent.fifo, silent.log, timeout_seconds=0.2).run(["Dump"])
    finally:
        silent.close()
