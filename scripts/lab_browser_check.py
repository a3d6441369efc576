"""The lab as a user sees it, checked in a real (headless) Chromium: start the server as `make lab`
does, open a notebook, wait for its kernel to connect, run its first cells and one typed cell, take
screenshots, then read the server's log for errors (tracebacks, HTTP 5xx, the `kernel_ws_protocol`
AttributeError of issue 65). Nothing is saved: autosave is off in a throw-away settings folder, and
the script stops the server and the browser it started.

    python scripts/lab_browser_check.py [--out /tmp/lab65] [--port 8899] [--cells 2] \
        [--notebook notebooks/03_training.ipynb] [--cell 'import workbench; print(workbench.__file__)'] \
        [--early-close] [--small docs/img/lab_notebook03.png]

It drives Chromium through the DevTools protocol with `websocket-client` (no other package): the
lab's URL with a token, the notebook's tab, the kernel indicator of its toolbar (`data-status`),
Shift+Enter on the first code cell and the next ones, a cell typed above the next one, and
`Page.captureScreenshot` into --out (`<NN>-<what>.png`, the server's log in `server.log`). The
default runs notebook 03's parameters and set-up cells only (a few seconds of imports), never its
training. `--early-close` then reproduces a client that leaves during a kernel websocket's
handshake, which is what logs the AttributeError (docs/notebooks.md). `--small` writes a
downscaled copy of the last screenshot (Pillow) for the docs. Exit 0 when the kernel connected,
every cell ran and the browser session's log holds no error line; 1 otherwise.
"""

import argparse
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import websocket

ROOT = Path(__file__).resolve().parent.parent
# the log lines that mean a user may see a failure (tornado logs a 5xx as "500 GET ...")
ERROR = re.compile(r"Traceback|Error|\b5\d\d (GET|POST|PUT|PATCH|DELETE)\b|kernel_ws_protocol")


def http_json(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_for(what: str, probe, timeout: float, every: float = 0.5):
    """probe() until it returns something truthy; its value, or SystemExit after `timeout` seconds."""
    end, value = time.monotonic() + timeout, None
    while time.monotonic() < end:
        try:
            value = probe()
        except Exception as error:  # the server or the page is not up yet
            value = error
        if value and not isinstance(value, Exception):
            return value
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})")


class Page:
    """One Chromium tab over the DevTools protocol: commands by id, events skipped."""

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def send(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def key(self, key: str, code: str, keycode: int, shift: bool = False):
        mods = 8 if shift else 0
        common = dict(key=key, code=code, windowsVirtualKeyCode=keycode, nativeVirtualKeyCode=keycode, modifiers=mods)
        self.send("Input.dispatchKeyEvent", type="rawKeyDown", **common)
        self.send("Input.dispatchKeyEvent", type="keyUp", **common)

    def click(self, selector: str):
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + Math.min(r.width / 2, 20), r.y + Math.min(r.height / 2, 10)]; })()"
        )
        if not box:
            raise SystemExit(f"nothing to click: {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path: Path):
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        print(f"screenshot: {path}")


def early_close(base: str, port: int, token: str, after: float = 0.3) -> None:
    """A client that leaves during the kernel websocket's handshake: start a kernel, ask for its
    channels as a browser does, close the socket `after` seconds later (while the server still waits
    for the new kernel's kernel_info reply, before it answers 101), then shut the kernel down."""
    request = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST")
    kernel = json.loads(urllib.request.urlopen(request, timeout=30).read())["id"]
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            (
                f"GET /api/kernels/{kernel}/channels?session_id=early-close&token={token} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: v1.kernel.websocket.jupyter.org\r\n\r\n"
            ).encode()
        )
        time.sleep(after)
    time.sleep(10)  # the server finishes the handshake it was waiting on
    request = urllib.request.Request(f"{base}/api/kernels/{kernel}?token={token}", method="DELETE")
    urllib.request.urlopen(request, timeout=30).read()
    print(f"early close: kernel {kernel}, socket closed {after} s after the request")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="/tmp/lab65", help="screenshots, the server's log, throw-away settings")
    parser.add_argument("--port", type=int, default=8899)
    parser.add_argument("--debug-port", type=int, default=9333, help="Chromium's DevTools port")
    parser.add_argument("--token", default="lab-browser-check")
    parser.add_argument("--notebook", default="notebooks/03_training.ipynb", help="relative to the repository root")
    parser.add_argument("--cells", type=int, default=2, help="code cells to run from the first one")
    parser.add_argument(
        "--cell", default="import workbench; print(workbench.__file__)", help="a cell typed and run after them"
    )
    parser.add_argument("--small", default=None, help="write a downscaled PNG of the last screenshot here")
    parser.add_argument("--width", type=int, default=1050, help="width of the --small copy")
    parser.add_argument(
        "--early-close",
        action="store_true",
        help="then reproduce a client leaving during the websocket handshake (its log lines are expected)",
    )
    parser.add_argument(
        "--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    )
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = out / "lab-settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"autosave": false}\n')
    news = out / "lab-settings" / "@jupyterlab" / "apputils-extension"  # no "official Jupyter news?" toast
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}\n')
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        JUPYTERLAB_SETTINGS_DIR=str(out / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(out / "lab-workspaces"),
    )
    # `make lab`'s command, without the browser, on a fixed port and token
    server_cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--allow-root",
        "--ServerApp.root_dir=.",
        "--LabApp.default_url=/lab/tree/notebooks",
        "--no-browser",
        f"--port={args.port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={args.token}",
    ]
    log_path = out / "server.log"
    log = log_path.open("w")
    print("server:", " ".join(server_cmd[1:]))
    server = subprocess.Popen(server_cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    browser = None
    base = f"http://127.0.0.1:{args.port}"
    ok = False
    try:
        wait_for("the lab server", lambda: http_json(f"{base}/api/status?token={args.token}"), 120)
        browser = subprocess.Popen(
            [
                args.chromium,
                "--headless=new",
                f"--remote-debugging-port={args.debug_port}",
                "--no-sandbox",
                "--window-size=1400,900",
                "--disable-gpu",
                "--remote-allow-origins=*",
                "--no-first-run",
                f"--user-data-dir={out / 'chromium-profile'}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(out / "chromium.log").open("w"),
        )
        targets = wait_for(
            "Chromium's DevTools",
            lambda: [t for t in http_json(f"http://127.0.0.1:{args.debug_port}/json/list") if t.get("type") == "page"],
            60,
        )
        page = Page(targets[0]["webSocketDebuggerUrl"])
        page.send("Page.enable")
        page.send("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
        url = f"{base}/lab/tree/{args.notebook}?token={args.token}"
        print("open:", url)
        page.send("Page.navigate", url=url)
        status = "document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')?.dataset.status"
        t0 = time.monotonic()
        # connected: the server counts the tab's websocket, the kernel is idle, the page says so
        kernels = lambda: http_json(f"{base}/api/kernels?token={args.token}")  # noqa: E731
        statusbar = "[...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')].map(e => e.innerText).join(' | ')"

        def connected():
            state = (
                [(k["execution_state"], k["connections"]) for k in kernels()],
                page.js(status),
                page.js(statusbar),
            )
            connected.state = state
            return any(k == ("idle", 1) for k in state[0]) and state[1] == "idle"

        try:
            wait_for("the kernel to connect (idle)", connected, 180)
        except SystemExit:
            print("kernels (state, connections), indicator, status bar:", getattr(connected, "state", None))
            raise
        print(
            f"kernel connected and idle after {time.monotonic() - t0:.1f} s: "
            f"{[(k['name'], k['execution_state'], k['connections']) for k in kernels()]}"
        )
        # the first code cell selected: the notebook is the lab's current widget, the status bar shows its kernel
        page.click(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt")
        wait_for("the status bar to show the kernel", lambda: "Idle" in page.js(statusbar), 30)
        page.screenshot(out / "01-opened.png")

        # Shift+Enter from the first code cell, one cell at a time, each to its output
        count = "[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')].filter(e => /\\[\\d+\\]/.test(e.textContent)).length"
        for n in range(1, args.cells + 1):
            page.key("Enter", "Enter", 13, shift=True)
            wait_for(f"code cell {n} to run", lambda n=n: page.js(count) >= n and page.js(status) == "idle", 300)
            print(f"code cell {n} ran ({time.monotonic() - t0:.1f} s)")
        page.screenshot(out / "02-cells-run.png")

        if args.cell:  # a cell typed above the selected one, then run
            page.key("Escape", "Escape", 27)
            page.key("a", "KeyA", 65)
            page.key("Enter", "Enter", 13)
            page.send("Input.insertText", text=args.cell)
            page.key("Enter", "Enter", 13, shift=True)
            wait_for(
                "the typed cell to run", lambda: page.js(count) >= args.cells + 1 and page.js(status) == "idle", 120
            )
            time.sleep(1)
            page.key("Escape", "Escape", 27)
            # the typed cell at the bottom of the view, the output of the cells run before it above it
            page.js(
                "document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-selected')"
                "?.previousElementSibling?.scrollIntoView({block: 'end'})"
            )
            time.sleep(1)
            print(
                "typed cell output:",
                page.js(
                    "[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')].map(e => e.innerText.trim()).filter(Boolean).slice(-1)[0]"
                ),
            )
        final = out / "03-lab-kernel-running.png"
        page.screenshot(final)
        print("kernel indicator:", page.js(status), "| status bar:", page.js(statusbar))
        ok = True
        if args.small:
            from PIL import Image

            image = Image.open(final)
            image = image.resize((args.width, round(image.height * args.width / image.width)), Image.LANCZOS)
            image.convert("P", palette=Image.ADAPTIVE, colors=256).save(args.small, optimize=True)
            print(f"small copy: {args.small} ({Path(args.small).stat().st_size / 1024:.0f} KB)")
        page.ws.close()
        if args.early_close:
            browser_log_lines = len(log_path.read_text().splitlines())
            early_close(base, args.port, args.token)
    finally:
        for process in (browser, server):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
        log.close()
    lines = log_path.read_text().splitlines()
    if args.early_close and ok:  # the browser session's lines, then the early close's
        lines, later = lines[:browser_log_lines], lines[browser_log_lines:]
        print(f"server log of the early close ({len(later)} lines):")
        for line in later:
            print("  " + line)
    errors = [line for line in lines if ERROR.search(line)]
    print(f"server log of the browser session: {log_path} ({len(errors)} error lines)")
    for line in errors:
        print("  " + line)
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
