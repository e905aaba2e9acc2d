"""A headless Chromium driven over the DevTools protocol: open a page, read its DOM,
list every request it made, take a screenshot. For the browser's test and its pictures.

Chromium runs with ``--remote-debugging-pipe``: the protocol's messages go over two pipes
(its file descriptors 3 and 4, each message JSON ended by a NUL byte), so no port is
opened and nothing listens. The profile is a fresh temporary folder, background
networking, component updates and sync are off, and the browser is closed, then killed
by its process id if it lingers, when the ``with`` block ends. Every wait is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--remote-debugging-pipe")


def executable() -> str | None:
    """Chromium's path, or None where it is not installed (Debian: ``apt-get install chromium``)."""
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def _above(fd: int, low: int = 10) -> int:
    """``fd`` moved to a descriptor number of at least ``low``."""
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    os.close(fd)
    return moved


class Chromium:
    """``with Chromium() as browser: page = browser.open(url)``; ``timeout`` bounds each wait."""

    def __init__(self, timeout: float = 60.0, width: int = 1200, height: int = 900) -> None:
        self.timeout, self.width, self.height = timeout, width, height
        self.process: subprocess.Popen | None = None
        self._buffer, self._events, self._next = b"", [], 0

    def __enter__(self) -> "Chromium":
        path = executable()
        if path is None:
            raise FileNotFoundError("no Chromium found: apt-get install chromium")
        self.profile = tempfile.mkdtemp(prefix="vlreg-chromium-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # above 9, clear of 3 and 4; bash puts them on the descriptors Chromium reads (3) and
        # writes (4), then becomes Chromium (the same process id)
        to_browser, from_browser = (_above(fd) for fd in (to_browser, from_browser))
        wire = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        self.process = subprocess.Popen(["bash", "-c", wire, path, *FLAGS, f"--user-data-dir={self.profile}",
                                         "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, pass_fds=(to_browser, from_browser))
        os.close(to_browser)
        os.close(from_browser)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                try:
                    self.call("Browser.close", timeout=10)
                except Exception:
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.kill(self.process.pid, 9)
                    self.process.wait(timeout=10)
        finally:
            for fd in (self._read, self._write):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    # ---- the protocol ---------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        """Send a command and wait for its answer; the events that arrive meanwhile are kept."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        answer = self._until(lambda m: m.get("id") == self._next, timeout)
        if "error" in answer:
            raise RuntimeError(f"Chromium refused {method}: {answer['error']}")
        return answer.get("result", {})

    def event(self, method: str, session: str | None = None, timeout: float | None = None) -> dict:
        """The first event ``method`` (of ``session``) not yet taken, waiting for it."""
        for index, message in enumerate(self._events):
            if message.get("method") == method and message.get("sessionId") == session:
                return self._events.pop(index)
        return self._until(lambda m: m.get("method") == method and m.get("sessionId") == session, timeout, keep=False)

    def _until(self, wanted: Any, timeout: float | None, keep: bool = True) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
                if "method" in message:
                    self._events.append(message)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Chromium did not answer within {timeout or self.timeout} s")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the protocol's pipe (it exited)")
                self._buffer += chunk

    # ---- pages ----------------------------------------------------------------------

    def open(self, url: str) -> "Page":
        """A new tab at ``url``, loaded (its load event fired), recording its requests."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Network.enable", "Page.enable", "Runtime.enable"):
            self.call(method, session=session)
        self.call("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=session)
        self._events = [m for m in self._events if m.get("sessionId") != session]
        self.call("Page.navigate", {"url": url}, session=session)
        self.event("Page.loadEventFired", session)
        return Page(self, session, url)


class Page:
    """A loaded tab: `evaluate` JavaScript, `requests` it made, `screenshot`."""

    def __init__(self, browser: Chromium, session: str, url: str) -> None:
        self.browser, self.session, self.url = browser, session, url

    def evaluate(self, expression: str) -> Any:
        """``expression``'s value (JSON-able), run in the page."""
        found = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                       "awaitPromise": True}, self.session)
        if "exceptionDetails" in found:
            raise RuntimeError(f"the page's script failed: {found['exceptionDetails'].get('text')}")
        return found["result"].get("value")

    def requests(self) -> list[str]:
        """The URL of every request the page made so far (the page itself included)."""
        self.evaluate("1")  # a round trip: the events before it have arrived
        return [m["params"]["request"]["url"] for m in self.browser._events
                if m.get("method") == "Network.requestWillBeSent" and m.get("sessionId") == self.session]

    def screenshot(self, path: "str | os.PathLike") -> Path:
        """The viewport as a PNG at ``path``."""
        data = self.browser.call("Page.captureScreenshot", {"format": "png"}, self.session)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
