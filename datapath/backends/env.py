"""A sandbox on a real backend and everything around it, removed as a unit.

ovs-vswitchd runs in a "switch" namespace of its own, so the devices OVS and
DPDK create (taps, the bridge's internal port, net_tap's kernel side) never
appear in the caller's namespace; the far ends of ports live in peer
namespaces.  close() stops helper processes and ports, then the sandbox, then
deletes the namespaces (and with them every device inside).
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any, TypeVar

from datapath.backends import afxdp, dpdk, tap
from datapath.backends.kernel import KernelPort
from datapath.backends.netns import Cleanup, Netns, unique_name
from harness import teardown_trace
from harness.control import Transcript
from harness.install import OvsInstall
from harness.sandbox import Sandbox

P = TypeVar("P", bound=KernelPort)


class RealEnv:
    """A sandbox on a real backend (vswitchd in a namespace of its own) and the
    namespaces, ports and helper processes around it.  close() removes all of it."""

    def __init__(self, install: OvsInstall, rundir: Path, backend: str, tso: bool,
                 transcript: Transcript, sandbox_extra: dict[str, Any] | None = None) -> None:
        """`sandbox_extra` replaces Sandbox options of the backend's (other_config
        is merged key by key, None removing a key); DPDK is waited for only when
        dpdk-init is true."""
        self.backend, self.tso = backend, tso
        self.cleanup = Cleanup()  # processes and ports, before the sandbox stops
        self.ns_cleanup = Cleanup()  # namespaces, once nothing uses them
        self.peers: dict[str, Netns] = {}
        self.closed = False
        self.problems: list[str] = []
        self.switch_ns = Netns(unique_name("sw"))
        self.ns_cleanup.defer(f"delete namespace {self.switch_ns.name}", self.switch_ns.delete)
        self.bpffs: afxdp.Bpffs | None = None
        try:
            if backend == "tap":
                opts = tap.sandbox_options(self.switch_ns, tso)
            elif backend == "afxdp":
                self.bpffs = afxdp.Bpffs()
                self.ns_cleanup.defer("unmount bpffs", self.bpffs.umount)
                opts = afxdp.sandbox_options(self.switch_ns, self.bpffs)
            else:
                opts = dpdk.sandbox_options(install, self.switch_ns, tso)
            options: dict[str, Any] = {**opts}  # the backend's, then sandbox_extra's
            for key, value in (sandbox_extra or {}).items():
                if key == "other_config":  # a key set to None is left out
                    merged = {**(opts.get("other_config") or {}), **value}
                    options[key] = {k: v for k, v in merged.items() if v is not None}
                else:
                    options[key] = value
            self.sb = Sandbox(install, rundir, transcript, **options)
            try:
                self.sb.start()
                other: dict[str, str] = options.get("other_config") or {}
                if backend == "dpdk" and other.get("dpdk-init") == "true":
                    dpdk.wait_initialized(self.sb)
            except BaseException:
                self.sb.kill()
                raise
        except BaseException:
            self.ns_cleanup.run()
            raise
        self.sb.log.begin_case()

    def peer(self, role: str) -> Netns:
        """A namespace for the far end of a port (created on first use)."""
        if role not in self.peers:
            ns = Netns(unique_name(role))
            self.ns_cleanup.defer(f"delete namespace {ns.name}", ns.delete)
            self.peers[role] = ns
        return self.peers[role]

    def own(self, port: P) -> P:
        self.cleanup.defer(f"close {port.name}", port.close)
        return port

    def spawn(self, what: str, argv: list[str], ns: Netns | None = None,
              **kwargs: Any) -> subprocess.Popen[str]:
        """A helper process (iperf3, ...) in `ns`, killed at close() if still running."""
        proc = subprocess.Popen(ns.exec_argv(argv) if ns else argv, start_new_session=True,
                                text=True, **kwargs)

        def stop() -> None:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.cleanup.defer(f"stop {what}", stop)
        return proc

    def close(self, scan_logs: bool = True) -> list[str]:
        """Stop everything; returns the problems (log lines, a dead daemon, cleanup
        errors), and keeps them in self.problems.  A second call does nothing."""
        if self.closed:
            return []
        self.closed = True
        teardown_trace.note(f"close the {self.backend} environment")
        problems = self.cleanup.run()
        try:
            with teardown_trace.step(f"stop the {self.backend} sandbox"):
                self.sb.stop(scan_logs=scan_logs)
        except AssertionError as exc:
            problems.append(str(exc))
            self.sb.kill()
        except BaseException:
            self.sb.kill()
            raise
        finally:
            problems += self.ns_cleanup.run()
            self.problems = problems
        return problems
