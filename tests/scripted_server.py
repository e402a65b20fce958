"""A scripted OpenAI-compatible chat server on 127.0.0.1 for exact request counts.

``ScriptedServer(respond)``: ``respond(model, messages, n)`` returns the reply text, or an int HTTP
status to fail that request (``n`` counts requests from 1). Every request is recorded (model,
messages and the whole JSON body). ``gate`` (a threading.Event, set by default) holds every request until it is set, so a
test can keep a run busy exactly as long as it needs, with no timing windows; ``seen`` is set once
the first request has arrived.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Respond = Callable[[str, list[dict[str, str]], int], "str | int"]


def request_key(model: str, messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps([model, messages], sort_keys=True).encode()).hexdigest()[:16]


class ScriptedServer:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []  # {model, messages, key, status}
        self.gate = threading.Event()
        self.gate.set()
        self.seen = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with server._lock:
                    n = len(server.requests) + 1
                    rec = {
                        "model": body.get("model"),
                        "messages": body.get("messages"),
                        "n": n,
                        "key": request_key(body.get("model"), body.get("messages")),
                        "body": body,
                    }
                    server.requests.append(rec)
                server.seen.set()
                server.gate.wait()
                out = server.respond(rec["model"], rec["messages"], n)
                if isinstance(out, int):
                    rec["status"] = out
                    data = json.dumps({"error": {"message": f"scripted {out}"}}).encode()
                    self.send_response(out)
                else:
                    rec["status"] = 200
                    words = sum(len(m["content"].split()) for m in rec["messages"])
                    data = json.dumps(
                        {
                            "id": f"r{n}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": rec["model"],
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": out}, "finish_reason": "stop"}],
                            "usage": {
                                "prompt_tokens": words,
                                "completion_tokens": len(out.split()),
                                "total_tokens": words + len(out.split()),
                            },
                        }
                    ).encode()
                    self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spec(self, model: str) -> str:
        return f"openai-compatible/{model}@http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()
