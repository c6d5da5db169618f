"""Open report pages in headless Chromium over the DevTools protocol (stdlib only).

The report's tests use it as a person would use a browser: load a page, time it,
collect console errors and uncaught exceptions, query the DOM and save a
screenshot.  Chromium is started with `--remote-debugging-port=0` on a fresh
profile; the port is read from the profile's DevToolsActivePort file and a
minimal websocket client (RFC 6455, text frames) speaks the protocol in flattened
session mode.  The browser is stopped, and killed if need be, on close().
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0
REAP_BOUND = 60.0  # a bound on a SIGKILLed group's exit, so a stuck kernel cannot hang the run
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-breakpad", "--disable-crash-reporter",
         "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0")


class BrowserError(Exception):
    """Chromium did not start, or the DevTools connection failed."""


def find_chromium() -> str | None:
    """The first Chromium on PATH, or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _WebSocket:
    """Just enough of a websocket client for DevTools: masked text frames out, frames in."""

    def __init__(self, port: int, path: str, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BrowserError("DevTools closed the connection during the handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise BrowserError(f"DevTools handshake refused: {status.decode(errors='replace')}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytearray([0x81])  # FIN + text
        if len(payload) < 126:
            header.append(0x80 | len(payload))
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        mask = os.urandom(4)
        header += mask
        self.sock.sendall(bytes(header) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise BrowserError("DevTools connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> str:
        """The next complete text message (pings are ignored, fragments joined)."""
        parts: list[bytes] = []
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = first & 0x0F
            if opcode == 0x8:
                raise BrowserError("DevTools closed the websocket")
            if opcode in (0x9, 0xA):
                continue
            parts.append(payload)
            if first & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class PageLoad:
    """What opening one page gave: timing, problems the console saw."""

    url: str
    seconds: float  # from the navigation request to the load event (and our script's ready mark)
    errors: list[str] = field(default_factory=list)


class Browser:
    """One headless Chromium with one tab; use as a context manager."""

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 1000) -> None:
        self.executable = executable or find_chromium()
        if not self.executable:
            raise BrowserError("chromium not found on PATH")
        self.profile = tempfile.mkdtemp(prefix="report-chromium-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: _WebSocket | None = None
        self.session = ""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.size = (width, height)
        self.log: Any = None

    def __enter__(self) -> "Browser":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        argv = [str(self.executable), *FLAGS, f"--user-data-dir={self.profile}",
                f"--window-size={self.size[0]},{self.size[1]}", "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.stderr"), "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserError(f"chromium did not start (exit {self.proc.poll()}): {self._stderr_tail()}")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = _WebSocket(int(port), path, CALL_TIMEOUT)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        metrics = {"width": self.size[0], "height": self.size[1], "deviceScaleFactor": 1,
                   "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=True)

    def _stderr_tail(self) -> str:
        try:
            lines = Path(self.profile, "chromium.stderr").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-5:])

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: bool = False) -> dict[str, Any]:
        """Send one DevTools command and return its result; events seen meanwhile are kept."""
        if self.ws is None:
            raise BrowserError("not connected")
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.receive())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def _wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        assert self.ws is not None
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(i)
            if time.monotonic() > deadline:
                raise BrowserError(f"no {method} within {timeout} s")
            self.ws.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.receive()))
            except socket.timeout:
                continue
            finally:
                self.ws.sock.settimeout(CALL_TIMEOUT)

    def open(self, url: str, timeout: float = 30.0) -> PageLoad:
        """Navigate and wait for the load event; errors are those logged during the load."""
        self.events.clear()
        started = time.monotonic()
        result = self.call("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self._wait_event("Page.loadEventFired", timeout)
        seconds = time.monotonic() - started
        ready = self.evaluate("window.reportReady || 0")
        if ready:  # the index page's script marks when its table and matrix are drawn
            seconds = max(seconds, float(ready) / 1000.0)
        return PageLoad(url=url, seconds=seconds, errors=self.console_errors())

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        if self.ws is not None:
            self.call("Runtime.evaluate", {"expression": "0"}, session=True)  # collect pending events
        errors = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                text = details.get("exception", {}).get("description") or details.get("text", "")
                errors.append(f"exception: {text}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
                errors.append("console.error: " + " ".join(args))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(f"log: {entry.get('text', '')} {entry.get('url', '')}".strip())
        return errors

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: str, full_page: bool = False) -> str:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.call("Browser.close")
            except (BrowserError, OSError):
                pass
            self.ws.close()
            self.ws = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
            self._reap_group()
            self.proc = None
        if getattr(self, "log", None) is not None:
            self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _reap_group(self) -> None:
        """Chromium's helpers share its process group; none may outlive the browser.

        SIGKILL goes to the whole group, then we wait for the event that matters:
        no member of the group left, alive or dying (a killed process shows state R
        or D until its exit is done, longer on a loaded machine). Some helpers
        (crashpad, the zygote) are double-forked, so they end up as children of
        PID 1, which is this very process inside ./ovstest's PID namespace: their
        zombies are ours to reap, and only those. Someone else's zombie is gone as
        far as the group is concerned (it holds nothing but its exit status).
        """
        assert self.proc is not None
        group = self.proc.pid
        deadline = time.monotonic() + REAP_BOUND
        while True:
            try:
                os.killpg(group, signal.SIGKILL)  # again each round: a fork may race the first
            except (ProcessLookupError, PermissionError):
                pass
            members = _group_members(group)
            for pid, state, ours in members:
                if ours and state == "Z":
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
            if not members:
                return
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium's processes outlived SIGKILL for {REAP_BOUND:.0f} s: "
                                   + ", ".join(f"{pid} {state}" for pid, state, _ in members))
            time.sleep(0.02)


def _group_members(group: int) -> list[tuple[int, str, bool]]:
    """Processes of process group `group` that still count (Linux /proc).

    Each as (pid, state, ours): every live or dying member, and zombies whose
    parent is this process (ours to reap); another parent's zombie is left out.
    """
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if pgrp == group and (state != "Z" or ppid == me):
            found.append((int(entry), state, ppid == me))
    return found
