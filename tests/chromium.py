"""Drive headless Debian Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No port and no HTTP/WebSocket client are involved, so proxies and busy ports cannot interfere:
Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4.
:func:`render` opens a page, collects uncaught exceptions, console errors and log errors while it
loads, waits for every image to decode and returns what the page shows (tables, images with their
natural size, sections).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--window-size=1280,900",
    "--remote-debugging-pipe",
]

# What the page shows, measured in the page after load and image decoding.
PAGE_STATE_JS = """
(async () => {
  await Promise.all(Array.from(document.images).map(i => i.decode().catch(() => null)));
  const vis = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
  return {
    title: document.title,
    sections: Array.from(document.querySelectorAll('section')).map(s => s.id),
    tables: Array.from(document.querySelectorAll('table')).map(t => ({
      section: t.closest('section') ? t.closest('section').id : '', rows: t.rows.length,
      visible: vis(t), header: Array.from(t.rows[0] ? t.rows[0].cells : []).map(c => c.textContent)})),
    images: Array.from(document.images).map(i => ({
      alt: i.alt, complete: i.complete, naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight,
      visible: vis(i), inDetails: !!i.closest('details'), scheme: i.src.split(':')[0]})),
  };
})()
"""


def chromium_path() -> str | None:
    return (
        os.environ.get("MASCOT_CHROMIUM")
        or shutil.which("chromium")
        or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    )


@dataclass
class PageResult:
    state: dict[str, Any]
    exceptions: list[str] = field(default_factory=list)  # Runtime.exceptionThrown
    console_errors: list[str] = field(default_factory=list)  # console.error / console.assert
    log_errors: list[str] = field(default_factory=list)  # Log.entryAdded at level error (failed loads, CSP, ...)

    @property
    def errors(self) -> list[str]:
        return self.exceptions + self.console_errors + self.log_errors

    @property
    def broken_images(self) -> list[dict[str, Any]]:
        return [i for i in self.state["images"] if not i["complete"] or i["naturalWidth"] <= 0 or i["naturalHeight"] <= 0]


class Chromium:
    """One headless browser; ``render(path)`` opens a fresh tab per page."""

    def __init__(self, binary: str, profile: Path, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        self.stderr_path = profile.parent / "chromium.stderr"
        profile.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "wb") as err:
            # bash (dash cannot redirect fds above 9) places our pipe ends on fds 3 (commands in) and 4 (replies out), then becomes Chromium
            self.proc = subprocess.Popen(
                [
                    shutil.which("bash") or "/bin/bash",
                    "-c",
                    f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-',
                    "sh",
                    binary,
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    "about:blank",
                ],
                pass_fds=(to_chrome_r, from_chrome_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    # protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Chromium did not answer in {self.timeout:.0f}s; stderr: {self.stderr_tail()}")
            ready, _, _ = select.select([self._r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(
                        f"Chromium closed the DevTools pipe (exit {self.proc.poll()}); stderr: {self.stderr_tail()}"
                    )
                self._buf += chunk
            elif self.proc.poll() is not None:
                raise RuntimeError(f"Chromium exited with {self.proc.returncode}; stderr: {self.stderr_tail()}")
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    # pages
    def render(self, path: Path) -> PageResult:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.events = [e for e in self.events if e.get("sessionId") != session]  # drop about:blank's events
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_event("Page.loadEventFired", session)
        res = self.send(
            "Runtime.evaluate", {"expression": PAGE_STATE_JS, "awaitPromise": True, "returnByValue": True}, session=session
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"page state script failed: {res['exceptionDetails']}")
        out = PageResult(state=res["result"]["value"])
        self.collect(out, session)
        self.session = session
        return out

    def evaluate(self, expression: str) -> Any:
        res = self.send(
            "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session=self.session
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def collect(self, out: PageResult, session: str) -> None:
        """Move this page's error events seen so far into ``out``."""
        keep = []
        for e in self.events:
            if e.get("sessionId") != session:
                keep.append(e)
                continue
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.exceptions.append((d.get("exception") or {}).get("description") or d.get("text", "exception"))
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                out.log_errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        self.events = keep

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self._w, json.dumps({"id": 10**6, "method": "Browser.close"}).encode() + b"\0")
                    self.proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the session started for this browser only
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
