"""dpctl.at (tests 1169-1172): dpctl/ commands on a datapath of their own.

Upstream's sequence, command by command, with its exact outputs (after its
`sed 's/(.*)/(...)/'` where it applies one; an AT_CHECK without an output
expects none).  No frame crosses a port in these four tests: the flows are
installed, modified and deleted, never hit, so there is nothing to judge with
the model.  OVS_VSWITCHD_START's br0 is created as upstream's is; the dpctl
commands work on dummy@br0, a datapath apart from br0's (dummy@ovs-dummy).

cases/dpif_netdev/test_dpctl.py reproduces dpif-netdev.at's dpctl/add-flow
tests; this module is dpctl.at's.
"""
from __future__ import annotations

import re

import pytest

from harness.control import Result, check
from harness.sandbox import Sandbox

DPCTL_AT = {"file": "dpctl.at"}
SERVER_ERROR = "ovs-appctl: ovs-vswitchd: server returned an error\n"
SHOW_BR0 = ("dummy@br0:\n  lookups: hit:0 missed:0 lost:0\n  flows: 0\n"
            "  port 0: br0 (dummy-internal)\n")


def sed_parens(text: str) -> str:
    """sed 's/(.*)/(...)/': per line, from the first '(' to the last ')'."""
    return "".join(re.sub(r"\(.*\)", "(...)", line) + "\n" for line in text.splitlines())


def ok(result: Result, stdout: str | None = "") -> Result:
    """AT_CHECK([cmd]) or AT_CHECK([cmd], [0], [stdout]): nothing on stderr."""
    return check(result, stdout=stdout, stderr="")


def refused(result: Result, stderr: str, *, sed: bool = False) -> Result:
    """AT_CHECK([cmd], [2], [], [stderr]); `sed`: compared after sed_parens()."""
    check(result, stdout="")
    got = sed_parens(result.stderr) if sed else result.stderr
    assert got == stderr, f"$ {' '.join(result.argv)}\nstderr: {result.stderr!r}"
    return result


@pytest.mark.upstream("dpctl - add-dp del-dp", **DPCTL_AT)
def test_add_dp_del_dp(sandbox: Sandbox) -> None:
    """A datapath is added once (a second add is EEXIST) and deleted once (a
    second delete cannot open it)."""
    sandbox.add_of_br("br0")
    ok(sandbox.dpctl("add-dp", "dummy@br0"))
    refused(sandbox.dpctl("add-dp", "dummy@br0", rc=2),
            "ovs-vswitchd: add_dp (File exists)\n" + SERVER_ERROR)
    ok(sandbox.dpctl("del-dp", "dummy@br0"))
    refused(sandbox.dpctl("del-dp", "dummy@br0", rc=2),
            "ovs-vswitchd: opening datapath (...)\n" + SERVER_ERROR, sed=True)


@pytest.mark.upstream("dpctl - add-if set-if del-if", **DPCTL_AT)
@pytest.mark.sandbox(enable_dummy="override")
def test_add_if_set_if_del_if(sandbox: Sandbox) -> None:
    """Ports of a dpctl datapath: added at a chosen port number, not twice; a
    port's type cannot change; the local port cannot be deleted; nothing works
    on a deleted datapath."""
    sandbox.add_of_br("br0")
    ok(sandbox.dpctl("add-dp", "dummy@br0"))
    ok(sandbox.dpctl("show", "dummy@br0"), SHOW_BR0)
    ok(sandbox.dpctl("add-if", "dummy@br0", "vif1.0,type=dummy,port_no=5"))
    ok(sandbox.dpctl("show", "dummy@br0"), SHOW_BR0 + "  port 5: vif1.0 (dummy)\n")
    refused(sandbox.dpctl("add-if", "dummy@br0", "vif1.0,type=dummy", rc=2),
            "ovs-vswitchd: adding vif1.0 to dummy@br0 failed (...)\n" + SERVER_ERROR, sed=True)
    ok(sandbox.dpctl("set-if", "dummy@br0", "vif1.0,port_no=5"))
    refused(sandbox.dpctl("set-if", "dummy@br0", "vif1.0,type=system", rc=2),
            "ovs-vswitchd: vif1.0: can't change type from dummy to system\n" + SERVER_ERROR)
    ok(sandbox.dpctl("set-if", "dummy@br0", "br0,type=dummy-internal"))
    refused(sandbox.dpctl("set-if", "dummy@br0", "br0,type=internal", rc=2),
            "ovs-vswitchd: br0: can't change type from dummy-internal to internal\n"
            + SERVER_ERROR)
    ok(sandbox.dpctl("del-if", "dummy@br0", "vif1.0"))
    ok(sandbox.dpctl("show", "dummy@br0"), SHOW_BR0)
    refused(sandbox.dpctl("del-if", "dummy@br0", "vif1.0", rc=2),
            "ovs-vswitchd: no port named vif1.0\n" + SERVER_ERROR)
    ok(sandbox.dpctl("show", "dummy@br0"), SHOW_BR0)
    refused(sandbox.dpctl("del-if", "dummy@br0", "nonexistent", rc=2),
            "ovs-vswitchd: no port named nonexistent\n" + SERVER_ERROR)
    refused(sandbox.dpctl("del-if", "dummy@br0", "br0", rc=2),
            "ovs-vswitchd: deleting port br0 from dummy@br0 failed (...)\n" + SERVER_ERROR,
            sed=True)
    ok(sandbox.dpctl("del-dp", "dummy@br0"))
    refused(sandbox.dpctl("del-if", "dummy@br0", "br0", rc=2),
            "ovs-vswitchd: opening datapath (...)\n" + SERVER_ERROR, sed=True)
    # OVS_VSWITCHD_STOP's filters.
    sandbox.allow_log(r"dummy@br0: port_del failed", r"dummy@br0: failed to add vif1\.0 as port",
                      r"Dropped 1 log messages in last")


KEY = "in_port(1),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:{dst:02d}),eth_type(0x1234)"
DUMP_HEAD = "flow-dump from the main thread:\n"


def dumped(key: str, out: int) -> str:
    return f"recirc_id(0),{key}, packets:0, bytes:0, used:never, actions:{out}\n"


def dump_sorted(sandbox: Sandbox) -> str:
    """dpctl/dump-flows dummy@br0 | sort."""
    out = ok(sandbox.dpctl("dump-flows", "dummy@br0"), stdout=None).stdout
    return "".join(line + "\n" for line in sorted(out.splitlines()))


@pytest.mark.upstream("dpctl - add/mod/del-flows", **DPCTL_AT)
def test_add_mod_del_flows(sandbox: Sandbox) -> None:
    """Flows from a file: added, modified, deleted one by one, then with
    add/modify/delete verbs in one file, then all at once; each dump exact."""
    sandbox.add_of_br("br0")
    ok(sandbox.dpctl("add-dp", "dummy@br0"))
    flows = sandbox.rundir / "flows.txt"
    k2, k3, k4 = (KEY.format(dst=d) for d in (2, 3, 4))
    flows.write_text(f"{k2} 2\n")
    ok(sandbox.dpctl("add-flows", "dummy@br0", str(flows)))
    assert dump_sorted(sandbox) == DUMP_HEAD + dumped(k2, 2)
    flows.write_text(f"{k2} 3\n")
    ok(sandbox.dpctl("mod-flows", "dummy@br0", str(flows)))
    assert dump_sorted(sandbox) == DUMP_HEAD + dumped(k2, 3)
    flows.write_text(f"{k2}\n")
    ok(sandbox.dpctl("del-flows", "dummy@br0", str(flows)))
    assert dump_sorted(sandbox) == ""
    flows.write_text(f"add {k2} 2\nadd {k3} 2\nadd {k4} 2\nmodify {k2} 1\ndelete {k3}\n")
    ok(sandbox.dpctl("add-flows", "dummy@br0", str(flows)))
    assert dump_sorted(sandbox) == DUMP_HEAD + dumped(k2, 1) + dumped(k4, 2)
    ok(sandbox.dpctl("del-flows", "dummy@br0"))
    assert dump_sorted(sandbox) == ""
    ok(sandbox.dpctl("del-dp", "dummy@br0"))


@pytest.mark.upstream("dpctl - ct-set-limits ct-get-limits ct-del-limits", **DPCTL_AT)
def test_ct_limits(sandbox: Sandbox) -> None:
    """Conntrack zone limits: an empty zone list means the default only, a
    malformed zone is EINVAL, and a zone limit set is listed with its count."""
    sandbox.add_of_br("br0")
    for zones in ((), ("zone=",), ("zone=,",)):
        ok(sandbox.dpctl("ct-get-limits", *zones), "default limit=0\n")
    refused(sandbox.dpctl("ct-get-limits", "zone=x", rc=2),
            "ovs-vswitchd: invalid zone (Invalid argument)\n" + SERVER_ERROR)
    ok(sandbox.dpctl("ct-del-limits", "zone="))
    ok(sandbox.dpctl("ct-set-limits", "zone=0,limit=0"))
    ok(sandbox.dpctl("ct-get-limits", "zone=0"), "default limit=0\nzone=0,limit=0,count=0\n")
    ok(sandbox.dpctl("ct-del-limits", "zone=0"))
