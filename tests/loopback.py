"""A loopback HTTP server in a thread, for the frontier client's tests and tests/attack.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server:
    """A loopback HTTP server in a thread: answers each POST with `respond(path)` =
    (status, headers, body), or a function that writes the raw reply to the socket (for slow or
    lying replies), and records the path and Authorization header of every request (`seen`) and
    its JSON body (`bodies`). Closing it stops every slow writer."""

    def __init__(self, respond):
        self.seen, self.bodies, self.stop = [], [], threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(json.loads(self.rfile.read(length) or b"null"))
                outer.seen.append(
                    {"method": self.command, "path": self.path, "auth": self.headers.get("Authorization")}
                )
                reply = respond(self.path)
                try:
                    if callable(reply):
                        reply(self.wfile)
                        return
                    status, headers, body = reply
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up, as it should on a reply it refuses

            do_POST = do_GET = handle_any

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
