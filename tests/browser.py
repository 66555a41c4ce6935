"""Headless Chromium for the tests that look at a page as a person would (DevTools protocol over loopback).

Tests skip, with the reason, where Debian's `chromium` or the `websocket-client` package is missing;
`.ci/run` installs both. Real mouse events go through `Input.dispatchMouseEvent`, so a click lands on
whatever element a person's click would.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str:
    """Returns the browser binary, or skips the test with the reason."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run does it)")


def mermaid_js() -> Path:
    """Returns mermaid.min.js fetched by .ci/run (or named by AUTOLOOP_MERMAID_JS), or skips with the reason."""
    named = os.environ.get("AUTOLOOP_MERMAID_JS")
    path = Path(named) if named else Path(__file__).resolve().parents[1] / ".ci" / "cache" / "mermaid.min.js"
    if not path.is_file():
        pytest.skip(f"mermaid.min.js is not at {path} (.ci/run fetches it with npm pack)")
    return path


class Page:
    """One browser tab driven through the DevTools protocol."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Sends one command and returns its result (events in between are skipped)."""
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """Returns the value of a JavaScript expression in the page (awaiting promises)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout: float = 60) -> None:
        """Navigates and waits until `ready` is true in the page."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate(ready):
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"{url}: not ready after {timeout} s ({ready})")

    def click(self, x: float, y: float) -> None:
        """Clicks with the left mouse button at page coordinates, as a person would."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        """Saves a PNG of the whole page."""
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


class Browser:
    """A headless Chromium on a loopback DevTools port; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.size = (width, height)
        self._process: subprocess.Popen[str] | None = None
        self._profile = tempfile.TemporaryDirectory(prefix="autoloop-chromium-")

    def __enter__(self) -> "Browser":
        websocket = pytest.importorskip("websocket", reason="websocket-client is not installed (pip install websocket-client)")
        self._websocket = websocket
        self._process = subprocess.Popen(
            [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--hide-scrollbars",
             f"--user-data-dir={self._profile.name}", f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.port = self._devtools_port()
        return self

    def _devtools_port(self) -> int:
        assert self._process is not None and self._process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self._process.stderr.readline()
            match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if match:
                return int(match.group(1))
            if not line and self._process.poll() is not None:
                break
        raise RuntimeError("Chromium did not open its DevTools port")

    def page(self) -> Page:
        """Returns the first tab, connected."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=30) as reply:
            targets = json.loads(reply.read())
        target = next(t for t in targets if t.get("type") == "page")
        socket = self._websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        page = Page(socket)
        page.call("Page.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                  deviceScaleFactor=1, mobile=False)
        return page

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=30)
        self._profile.cleanup()


def mermaid_errors(blocks: list[str], script: Path, workdir: Path) -> list[str | None]:
    """Returns, per block, None when the real mermaid.js renders it, else its parse error."""
    page_file = workdir / "mermaid-check.html"
    page_file.write_text(
        "<!doctype html><html><body><script src='" + script.as_uri() + "'></script></body></html>", encoding="utf-8"
    )
    with Browser() as browser:
        page = browser.page()
        page.open(page_file.as_uri(), "typeof mermaid !== 'undefined'")
        page.evaluate("mermaid.initialize({startOnLoad: false})")
        results = []
        for index, block in enumerate(blocks):
            results.append(page.evaluate(
                f"mermaid.render('m{index}', {json.dumps(block)}).then(() => null, e => String(e.message || e))"
            ))
        return results
