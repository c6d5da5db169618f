"""The in-process unixctl client: answers, errors, hang-ups, timeouts, long paths."""
from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from harness.unixctl import UnixctlClient, UnixctlError, UnixctlTimeout


def serve(path: Path, answer) -> threading.Thread:  # type: ignore[no-untyped-def]
    """A one-connection server: answer(request) gives the bytes to send back (or None)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd_dir = None
    if len(str(path)) > 100:  # bind through the directory, as OVS does
        import os
        fd_dir = os.open(path.parent, os.O_RDONLY)
        srv.bind(f"/proc/self/fd/{fd_dir}/{path.name}")
        os.close(fd_dir)
    else:
        srv.bind(str(path))
    srv.listen(1)

    def run() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            data = b""
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
                try:
                    request = json.loads(data)
                except ValueError:
                    continue
                data = b""
                reply = answer(request)
                if reply is None:
                    return
                conn.sendall(reply)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_result_error_and_split_replies(tmp_path: Path) -> None:
    def answer(req):  # type: ignore[no-untyped-def]
        if req["method"] == "fail":
            return json.dumps({"id": req["id"], "error": "no such thing", "result": None}).encode()
        text = json.dumps({"id": req["id"], "result": " ".join(req["params"]), "error": None})
        return b'{"id": 0, "method": "note"} ' + text.encode()  # a notification first
    serve(tmp_path / "d.ctl", answer)
    client = UnixctlClient(tmp_path / "d.ctl", timeout=5)
    assert client.transact("echo", ["a", "b"]) == ("a b", None)
    assert client.transact("fail", []) == (None, "no such thing")
    client.close()


def test_no_answer_is_a_timeout_naming_the_command(tmp_path: Path) -> None:
    serve(tmp_path / "d.ctl", lambda req: b"")
    client = UnixctlClient(tmp_path / "d.ctl", timeout=0.3)
    with pytest.raises(UnixctlTimeout, match="'dpctl/show' got no answer within 0.3 s"):
        client.transact("dpctl/show", [])


def test_hang_up_and_no_server(tmp_path: Path) -> None:
    serve(tmp_path / "d.ctl", lambda req: None)
    client = UnixctlClient(tmp_path / "d.ctl", timeout=5)
    with pytest.raises(UnixctlError, match="closed the connection"):
        client.transact("exit", [])
    with pytest.raises(UnixctlError, match="cannot connect"):
        UnixctlClient(tmp_path / "none.ctl")


def test_a_socket_path_longer_than_an_address_holds(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "ovs-vswitchd.12345.ctl"
    assert len(str(path)) > 108
    serve(path, lambda req: json.dumps({"id": req["id"], "result": "ok",
                                        "error": None}).encode())
    assert UnixctlClient(path, timeout=5).transact("version", []) == ("ok", None)
