"""Start and stop a real llm-katan server on 127.0.0.1 (a free port) for tests and benchmarks.

    with katan_server("--latency-ms", "200", backend="echo") as srv:
        srv.url  # http://127.0.0.1:PORT ; srv.v1 = srv.url + "/v1"

The server runs in its own process group and is killed at exit; startup waits for /health and
reports the server's log if it dies or does not come up.

llm-katan quirk (tool calls): by default llm-katan answers ANY request that carries tools with a
call of the first tool whose arguments are placeholders generated from its schema ("string",
0, ...), not with the model's text. Our Anthropic backend sends structured output (a judge's JSON
schema) as a forced tool, so against a default llm-katan every structured Anthropic answer would be
those placeholders, silently. ``katan_server`` therefore passes ``--no-auto-tool-providers`` for
every provider it serves (llm-katan then ignores the tools and answers with the model's text);
pass ``auto_tools=True`` to get llm-katan's placeholder tool calls
(``tests/test_backends_katan.py::test_katan_tool_quirk`` shows both).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class KatanServer:
    url: str
    port: int
    proc: subprocess.Popen
    log: Path

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def successes(self) -> int:
        """Requests the server answered with 200 (its /metrics counter)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(r"^llm_katan_requests_total\{[^}]*\} (\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    def log_tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


@contextlib.contextmanager
def katan_server(
    *flags: str,
    model: str = "echo-model",
    backend: str = "echo",
    providers: str = "openai",
    served_name: str | None = None,
    startup_timeout: float = 600.0,
    auto_tools: bool = False,
) -> Iterator[KatanServer]:
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="katan-"))
    log = tmp / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "llm_katan.cli",
        "--model",
        model,
        "--backend",
        backend,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--providers",
        providers,
        "--stats-file",
        str(tmp / "stats.json"),
        "--disable-dashboard",
        "--log-level",
        "WARNING",
        *flags,
    ]
    if served_name:
        cmd += ["--served-model-name", served_name]
    if not auto_tools:  # see the module docstring: otherwise tool requests get placeholder arguments
        cmd += ["--no-auto-tool-providers", providers]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    for var in ("LLM_KATAN_MODEL", "LLM_KATAN_PORT", "LLM_KATAN_BACKEND", "LLM_KATAN_HOST"):
        env.pop(var, None)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    srv = KatanServer(url=f"http://127.0.0.1:{port}", port=port, proc=proc, log=log)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llm-katan exited with {proc.returncode}:\n{srv.log_tail()}")
            try:
                with urllib.request.urlopen(srv.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llm-katan did not come up in {startup_timeout:.0f} s:\n{srv.log_tail()}")
            time.sleep(0.1)
        yield srv
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
