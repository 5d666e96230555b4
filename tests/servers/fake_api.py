"""A stand-in runtime API for the end-to-end tests of the probes: serves
recorded responses (path=FILE pairs) on a loopback port, or misbehaves on
purpose (--mode garbage|hang|redirect|huge). Run it under a runtime's name
(a symlink named `ollama`, `llama-server`, ...) so gputaskman takes it for
that runtime. Prints "ready" once it listens; serves until killed.

A counter that moves with time: `{{moving BASE RATE}}` in a served file is
answered as BASE + RATE x the seconds since the server started, so any two
reads, by whichever reader, see RATE a second between them.
"""

import argparse
import http.server
import re
import sys
import time

MOVING = re.compile(rb"\{\{moving (\d+) (\d+)\}\}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", default="serve", choices=["serve", "garbage", "hang", "redirect", "huge"])
    ap.add_argument("routes", nargs="*", help="PATH=FILE")
    args, _ = ap.parse_known_args()
    routes = {}
    # Other words are there for the command line gputaskman reads
    # (`ollama serve`, `llama-server -m FILE`).
    for route in (r for r in args.routes if "=" in r):
        path, _, file = route.partition("=")
        with open(file, "rb") as f:
            routes[path] = f.read()
    seen = []
    started = time.monotonic()

    def moving(match):
        base, rate = int(match.group(1)), int(match.group(2))
        return str(base + rate * (time.monotonic() - started)).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(self.path)
            if args.mode == "hang":
                time.sleep(3600)
            if args.mode == "redirect":
                self.send_response(302)
                self.send_header("Location", "http://192.0.2.1/props")
                self.end_headers()
                return
            if args.mode == "huge":
                self.send_response(200)
                self.send_header("Content-Length", str(50 << 20))
                self.end_headers()
                chunk = b"x" * (1 << 20)
                try:
                    for _ in range(50):
                        self.wfile.write(chunk)
                except OSError:
                    pass
                return
            body = routes.get(self.path.split("?")[0])
            if body is not None:
                body = MOVING.sub(moving, body)
            if args.mode == "garbage":
                body = b"this is not json {"
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
