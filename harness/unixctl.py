"""A unixctl client: OVS's control protocol (JSON-RPC over a Unix socket), in
process and bounded in time.

Each call sends {"method": COMMAND, "params": [ARGS], "id": N} and reads the
JSON object that answers it ({"result": TEXT, "error": TEXT, "id": N}), as
ovs-appctl does, with a deadline: a daemon that does not answer fails the
call, naming the command and the daemon, instead of blocking the run.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

DEFAULT_TIMEOUT = 30.0  # seconds a daemon may take to answer one command


class UnixctlError(Exception):
    """The call got no valid answer: no connection, a hang-up, or a timeout."""


class UnixctlTimeout(UnixctlError):
    """A unixctl request that got no reply in time."""


MAX_SUN_PATH = 107  # bytes of a Unix socket address, without the final NUL


def _connect(sock: socket.socket, path: Path) -> None:
    """Connect, also to a path longer than a socket address can hold: through
    /proc/self/fd/N/NAME, N a descriptor of its directory (as OVS itself does)."""
    if len(str(path).encode()) <= MAX_SUN_PATH:
        sock.connect(str(path))
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


class UnixctlClient:
    """A JSON-RPC client of a daemon's unixctl socket (what ovs-appctl speaks)."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path, self.timeout = path, timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            _connect(self._sock, path)
        except OSError as exc:
            self._sock.close()
            raise UnixctlError(f"cannot connect to {path}: {exc.strerror or exc}") from None
        self._buf = ""
        self._id = 0
        self._decoder = json.JSONDecoder()

    def transact(self, command: str, args: list[str],
                 timeout: float | None = None) -> tuple[str | None, str | None]:
        """(result, error) of one command, as the daemon answered it."""
        return self.finish(self.begin(command, args), command, timeout)

    def begin(self, command: str, args: list[str]) -> int:
        """Send a command without waiting for its answer; returns its id."""
        self._id += 1
        request = json.dumps({"method": command, "params": args, "id": self._id})
        try:
            self._sock.sendall(request.encode())
        except OSError as exc:
            raise UnixctlError(f"'{command}': {exc.strerror or exc}") from None
        return self._id

    def finish(self, request_id: int, command: str,
               timeout: float | None = None) -> tuple[str | None, str | None]:
        """The (result, error) of a command begin() sent."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while True:
                reply = self._next(deadline, command)
                if reply.get("id") == request_id:
                    break  # anything else (a notification) is not our answer
        except OSError as exc:
            raise UnixctlError(f"'{command}': {exc.strerror or exc}") from None
        error, result = reply.get("error"), reply.get("result")
        return (None if result is None else str(result),
                None if error is None else str(error))

    def _next(self, deadline: float, command: str) -> dict[str, object]:
        while True:
            text = self._buf.lstrip()
            if text:
                try:
                    obj, end = self._decoder.raw_decode(text)
                except json.JSONDecodeError:
                    pass  # incomplete: read more
                else:
                    self._buf = text[end:]
                    if not isinstance(obj, dict):
                        raise UnixctlError(f"'{command}': not a JSON-RPC message: {obj!r}")
                    return obj
            left = deadline - time.monotonic()
            if left <= 0:
                raise UnixctlTimeout(f"'{command}' got no answer within "
                                     f"{self.timeout:g} s")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                raise UnixctlTimeout(f"'{command}' got no answer within "
                                     f"{self.timeout:g} s") from None
            if not chunk:
                raise UnixctlError(f"'{command}': the daemon closed the connection")
            self._buf += chunk.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._sock.close()
