"""Headless Chromium for the dashboard's test: Debian's package, installed here when missing, and
driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``: JSON messages
ended by NUL on file descriptors 3 and 4), so no websocket library is needed."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import typing as t

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_or_install() -> str:
    """The path of a Chromium binary; as root on Debian, ``apt-get install chromium`` first if
    there is none.

    Raises:
        RuntimeError: none is installed and none can be (the reason says why).
    """
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        msg = "no chromium, and installing Debian's needs apt-get as root"
        raise RuntimeError(msg)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            msg = f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}"
            raise RuntimeError(msg)
    found = shutil.which("chromium")
    if found is None:
        msg = "apt-get installed chromium, but no chromium is on the PATH"
        raise RuntimeError(msg)
    return found


class Browser:
    """One headless Chromium with one page, driven by DevTools commands."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1100) -> None:
        self._profile = tempfile.mkdtemp(prefix="sj-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # (in the child: its fds 3 and 4 become the pipe's ends)
            reading = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)  # (clear of 3 and 4)
            writing = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self._process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",  # (root in a container has no user namespace to sandbox in)
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            preexec_fn=wire,
            pass_fds=(3, 4),  # (kept open in the child once `wire` made them)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        target = self.command("Target.createTarget", url="about:blank")["targetId"]
        attached = self.command("Target.attachToTarget", targetId=target, flatten=True)
        self._session: str | None = attached["sessionId"]

    def command(self, method: str, **params: t.Any) -> dict[str, t.Any]:
        """Send one DevTools command (to the page, once attached) and return its result."""
        self._id += 1
        message: dict[str, t.Any] = {"id": self._id, "method": method, "params": params}
        if getattr(self, "_session", None):
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return t.cast("dict[str, t.Any]", answer.get("result", {}))

    def _read(self) -> dict[str, t.Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                msg = "chromium closed its DevTools pipe"
                raise RuntimeError(msg)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return t.cast("dict[str, t.Any]", json.loads(line))

    def open(self, url: str) -> None:
        """Load `url` in the page."""
        self.command("Page.enable")
        self.command("Page.navigate", url=url)

    def evaluate(self, expression: str) -> t.Any:
        """The value of a JavaScript expression in the page."""
        got = self.command("Runtime.evaluate", expression=expression, returnByValue=True)
        return got.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float) -> t.Any:
        """Evaluate `expression` every 0.2 s until it is truthy; its value.

        Raises:
            TimeoutError: it was not within `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                msg = f"{expression} was not true within {timeout:g}s (last {value!r})"
                raise TimeoutError(msg)
            time.sleep(0.2)

    def screenshot(self, path: str) -> None:
        """Save the whole page as a PNG at `path`."""
        height = self.evaluate("document.documentElement.scrollHeight") or 1100
        width = self.evaluate("document.documentElement.scrollWidth") or 1280
        shot = self.command(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        )
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        try:
            self._session = None
            self.command("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)
