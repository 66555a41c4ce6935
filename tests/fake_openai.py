"""A loopback OpenAI-compatible server for tests: it hangs, answers garbage, fails (HTTP 500), refuses the key, knows no such model, or answers with a canned or scripted reply.

A request to `/embeddings` is answered with one vector per input text: the `embed` script's, else the text's letter counts.

Every request's JSON body is kept in `bodies` (its API key in `keys`), so a test asserts what litellm sent (temperature, max_tokens…).
"""

from __future__ import annotations

import http.server
import json
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Union

import pytest


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.requests += 1
        try:
            body: dict[str, Any] = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.server.bodies.append(body)
        self.server.keys.append(str(self.headers.get("authorization", "")).removeprefix("Bearer "))
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
        elif self.server.mode == "server-error":
            status = 500
            body = json.dumps({"error": {"message": "The server had an error while processing your request.",
                                         "type": "server_error"}}).encode()
        elif self.server.mode == "no-model":
            status = 404
            body = json.dumps({"error": {"message": f"The model `{body.get('model', '')}` does not exist or you do "
                                         "not have access to it.", "type": "invalid_request_error", "param": None,
                                         "code": "model_not_found"}}).encode()
        elif self.path.endswith("/embeddings"):
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            body = json.dumps({
                "object": "list", "model": body.get("model", ""),
                "data": [{"object": "embedding", "index": i, "embedding": self.server.embed(text)}
                         for i, text in enumerate(texts)],
                "usage": {"prompt_tokens": self.server.tokens, "total_tokens": self.server.tokens},
            }).encode()
        else:
            body = json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "test",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": self.server.answer(body)}}],
                "usage": {"prompt_tokens": self.server.tokens, "completion_tokens": self.server.tokens,
                          "total_tokens": 2 * self.server.tokens},
            }).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


# A canned reply, or a script turning the request's JSON body into the reply.
Reply = Union[str, Callable[[dict[str, Any]], str]]
# A script turning one input text of an embedding request into its vector.
Embed = Callable[[str], list[float]]


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str, reply: Reply, tokens: int = 1, embed: Embed | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.reply, self.requests, self.tokens = mode, reply, 0, tokens
        self.embed: Embed = embed or (lambda text: [float(text.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"])
        self.bodies: list[dict[str, Any]] = []
        self.keys: list[str] = []  # the API key each request carried
        self.release = threading.Event()

    def answer(self, body: dict[str, Any]) -> str:
        """Returns the script's answer to the request body, or the canned text with `@N@` as the request's number."""
        return self.reply(body) if callable(self.reply) else self.reply.replace("@N@", str(self.requests))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def fake_openai(
    mode: str, monkeypatch: pytest.MonkeyPatch, reply: Reply = "", tokens: int = 1, embed: Embed | None = None
) -> Iterator[_Server]:
    """Serves `mode` (hang | garbage | server-error | bad-key | no-model | reply) on loopback and points litellm's `openai/…` models at it.

    tokens: the prompt and the completion tokens each reply reports; embed: the vector of each embedded text.
    """
    server = _Server(mode, reply, tokens, embed)
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
