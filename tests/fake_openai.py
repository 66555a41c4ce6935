"""A loopback OpenAI-compatible server for tests: it hangs, answers garbage, refuses the key, or answers a canned reply."""

from __future__ import annotations

import http.server
import json
import threading
from contextlib import contextmanager
from typing import Iterator

import pytest


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        request = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.requests += 1
        self.server.bodies.append(request.decode("utf-8", errors="replace"))
        if self.server.mode == "hang":
            self.server.release.wait(120)  # never answers while the test runs
            return
        status = 200
        if self.server.mode == "garbage":
            body = b"<html>this is not JSON</html>"
        elif self.server.mode == "bad-key":
            status = 401
            body = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                         "code": "invalid_api_key"}}).encode()
        else:
            body = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "test",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": self._reply()}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _reply(self) -> str:
        """Returns the canned reply, `@N@` in it replaced by this request's number (so replies can differ)."""
        return self.server.reply.replace("@N@", str(self.server.requests))

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str, reply: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.reply, self.requests = mode, reply, 0
        self.bodies: list[str] = []  # each request's JSON body, in order (the prompts the model was sent)
        self.release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def fake_openai(mode: str, monkeypatch: pytest.MonkeyPatch, reply: str = "") -> Iterator[_Server]:
    """Serves `mode` (hang | garbage | bad-key | reply) on loopback and points litellm's `openai/…` models at it."""
    server = _Server(mode, reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.delenv("AUTOLOOP_MOCK_RESPONSE", raising=False)
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
