"""A loopback HTTP(S) proxy that refuses and records every request: the act scenarios' proof of staying offline.

The harness points HTTP_PROXY, HTTPS_PROXY and ALL_PROXY of act and every job at it (with only loopback in
NO_PROXY), so whatever tries to reach the network through the standard proxy variables (act's notices check,
pip, litellm, npm, git over https) lands here instead, is answered 403 and is listed in `requests`.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RecordingProxy:
    """Serves on 127.0.0.1; `requests` lists each request line it refused (e.g. `CONNECT api.example:443`)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _refuse(self) -> None:
                proxy.requests.append(self.requestline)
                self.send_response(403, "offline test")
                self.send_header("content-length", "0")
                self.end_headers()

            do_CONNECT = do_GET = do_POST = do_PUT = do_HEAD = _refuse  # noqa: N815 - names http.server calls

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        """Returns the proxy URL for the *_PROXY variables."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
