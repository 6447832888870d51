"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`), no extra
package: JSON messages separated by NUL on file descriptors 3 (to the browser) and 4 (from it).

```python
with Browser() as browser:
    browser.open(path.as_uri())
    browser.evaluate("document.title")          # a JavaScript expression's value
    browser.screenshot()                         # PNG bytes of the viewport
```
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")  # Debian package `chromium`


class BrowserError(AssertionError):
    """The browser did not answer as expected."""


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, width: int = 1280, height: int = 1600, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="ibpool-chromium-"))
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: its fds 3 and 4 become the pipe ends (via high copies)
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 100)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 100)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--allow-file-access-from-files",
                f"--window-size={width},{height}",
                f"--user-data-dir={self.profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=tuple(sorted({3, 4, to_browser_r, from_browser_w})),  # 3, 4: kept after `wire`
            preexec_fn=wire,  # noqa: PLW1509 (the DevTools pipe must sit on fds 3 and 4)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session = ""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (on the page's session once attached) and wait for its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("no answer from chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        data: dict[str, Any] = json.loads(message)
        return data

    def open(self, url: str) -> None:
        """Navigate and wait until the document has loaded (BrowserError with the reason when it cannot)."""
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"{url}: {answer['errorText']}")
        deadline = time.monotonic() + self.timeout
        while self.evaluate("document.readyState") != "complete" or self.evaluate("location.href") != url:
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        """PNG of the viewport (or of `clip`: x, y, width, height in CSS pixels of the document)."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        try:
            os.close(self._to_browser)
            os.close(self._from_browser)
        except OSError:
            pass
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
