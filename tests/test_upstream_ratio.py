"""bench/upstream_ratio.py --testsuite's pure parts: which of our ids belong to
which flavour testsuite, the testsuite's own numbers for their titles (from
its `-l`), its result lines and failure reasons, and the per-title tallies;
and bench/upstream_titles.py, the collection that tells ids from titles."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.upstream_ratio import (
    collected_cases,
    discover,
    failure_reasons,
    failure_summary,
    listing_numbers,
    not_linked,
    result_lines,
    suite_cases,
    tally,
    title_outcome,
    verdict_of,
)

ROOT = Path(__file__).resolve().parent.parent

# The shape of `tests/system-afxdp-testsuite -l` (OVS 4.0.0): a keywords line
# under some tests, and system-traffic.at numbered after system-afxdp.at.
AFXDP_LISTING = """\
openvswitch 4.0.0 test suite test groups:

 NUM: FILE-NAME:LINE     TEST-GROUP-NAME
      KEYWORDS

   1: system-afxdp.at:3  AF_XDP - infinite re-addition of failed ports
      afxdp infinite
   2: system-afxdp.at:27 AF_XDP - ping between pmd and non-pmd ports
      afxdp nonpmd
   3: system-traffic.at:3 datapath - ping between two ports
   4: system-traffic.at:26 datapath - http between two ports
  71: system-traffic.at:2551 conntrack - IPv4 ping
"""
DPDK_LISTING = """\
  28: system-dpdk.at:1010 OVS-DPDK - headroom expansion
      dpdk
  29: system-traffic.at:3 datapath - ping between two ports
  97: system-traffic.at:2551 conntrack - IPv4 ping
"""


def test_the_listing_numbers_titles_per_testsuite() -> None:
    afxdp, dpdk = listing_numbers(AFXDP_LISTING), listing_numbers(DPDK_LISTING)
    assert afxdp[("system-afxdp.at", "AF_XDP - infinite re-addition of failed ports")] == 1
    assert afxdp[("system-traffic.at", "datapath - ping between two ports")] == 3
    assert dpdk[("system-traffic.at", "datapath - ping between two ports")] == 29
    assert dpdk[("system-traffic.at", "conntrack - IPv4 ping")] == 97
    assert len(afxdp) == 5 and len(dpdk) == 3  # no keywords line, no header taken for a test


def case(nodeid: str, title: str, file: str, flavour: str | None = None) -> dict:
    return {"nodeid": nodeid, "upstream": title, "upstream_file": file,
            "params": {"flavour": flavour} if flavour else {}}


CASES = [
    case("st.py::test_ping[userspace]", "datapath - ping between two ports", "system-traffic.at",
         "userspace"),
    case("st.py::test_ping[afxdp]", "datapath - ping between two ports", "system-traffic.at",
         "afxdp"),
    case("st.py::test_ping[dpdk]", "datapath - ping between two ports", "system-traffic.at",
         "dpdk"),
    case("ct.py::test_ping[ipv4-afxdp]", "conntrack - IPv4 ping", "system-traffic.at", "afxdp"),
    case("ct.py::test_ping[other-afxdp]", "conntrack - IPv4 ping", "system-traffic.at", "afxdp"),
    # two titles in one id, as fixtures/records.py joins them
    case("st.py::test_two[afxdp]", "datapath - ping between two ports; datapath - http between "
         "two ports", "system-traffic.at", "afxdp"),
    # a flavour the case picks at run time: no parameter, a file every testsuite runs
    case("st.py::test_tso_only", "datapath - http between two ports", "system-traffic.at"),
    case("afxdp.py::test_infinite", "AF_XDP - infinite re-addition of failed ports",
         "system-afxdp.at"),
    case("dpdk.py::test_headroom", "OVS-DPDK - headroom expansion", "system-dpdk.at"),
    case("tap.py::test_tap", "traffic between namespaces using tap", "system-tap.at", "tso"),
    case("st.py::test_bogus[afxdp]", "<function upstream at 0x7f>", "system-traffic.at", "afxdp"),
    case("pmd.py::test_stats", "PMD - stats", "pmd.at"),
]


def test_ids_go_to_their_flavours_testsuite() -> None:
    afxdp = suite_cases(CASES, "check-afxdp")
    assert afxdp == {
        ("system-traffic.at", "datapath - ping between two ports"):
            ["st.py::test_ping[afxdp]", "st.py::test_two[afxdp]"],
        ("system-traffic.at", "conntrack - IPv4 ping"):
            ["ct.py::test_ping[ipv4-afxdp]", "ct.py::test_ping[other-afxdp]"],
        ("system-traffic.at", "datapath - http between two ports"): ["st.py::test_two[afxdp]"],
        ("system-afxdp.at", "AF_XDP - infinite re-addition of failed ports"):
            ["afxdp.py::test_infinite"],
    }
    dpdk = suite_cases(CASES, "check-dpdk")
    assert dpdk == {
        ("system-traffic.at", "datapath - ping between two ports"): ["st.py::test_ping[dpdk]"],
        ("system-dpdk.at", "OVS-DPDK - headroom expansion"): ["dpdk.py::test_headroom"],
    }
    assert suite_cases(CASES, "check-system-tso") == {
        ("system-tap.at", "traffic between namespaces using tap"): ["tap.py::test_tap"]}


def test_check_system_userspace_takes_the_userspace_flavour_only() -> None:
    """Without --testsuite, system-traffic.at's titles are check-system-userspace's:
    its ids are the userspace flavour's (or an id without a flavour), never the
    tso, afxdp or dpdk ones, which upstream runs in their own testsuites."""
    runs = discover({"cases": [*CASES, case("st.py::test_ping[tso]", "datapath - ping between "
                                            "two ports", "system-traffic.at", "tso")]})
    assert runs["system-traffic.at"].nodeids == ["st.py::test_ping[userspace]",
                                                 "st.py::test_tso_only"]
    assert "system-afxdp.at" not in runs and "system-dpdk.at" not in runs


def test_result_lines_take_the_result_not_a_word_of_the_title() -> None:
    stdout = """\
## ----------------------------- ##
## openvswitch 4.0.0 test suite. ##
## ----------------------------- ##
AF_XDP

  1: AF_XDP - infinite re-addition of failed ports   FAILED (system-afxdp.at:22)
  2: AF_XDP - ping between pmd and non-pmd ports     ok
datapath-sanity

 20: datapath - ping over erspan v1 tunnel           skipped (system-traffic.at:765)
 71: conntrack - IPv4 ping                           expected failure (system-traffic.at:2560)
 72: conntrack - IPv6 ping                           UNEXPECTED PASS

## ------------- ##
## Test results. ##
## ------------- ##

ERROR: 5 tests were run,
2 failed (1 expected failure).
1 test was skipped.
   Subject: [openvswitch 4.0.0] system-afxdp-testsuite: 1 72 failed
"""
    assert result_lines(stdout) == {1: "FAILED", 2: "ok", 20: "skipped", 71: "expected failure",
                                    72: "UNEXPECTED PASS"}
    verdict = verdict_of(stdout, 1)
    assert "re-addition" not in verdict and "Subject" not in verdict
    assert verdict == "ERROR: 5 tests were run,; 2 failed (1 expected failure).; 1 test was skipped."


def test_a_title_fails_when_one_of_its_ids_does() -> None:
    assert title_outcome(["passed", "skipped", "xfailed"]) == "passed"
    assert title_outcome(["passed", "failed"]) == "failed"
    assert title_outcome(["error"]) == "failed"
    assert title_outcome(["xpassed", "passed"]) == "failed"
    assert title_outcome(["skipped", "xfailed"]) == "xfailed"
    assert title_outcome(["skipped", "skipped"]) == "skipped"
    assert title_outcome([]) == "not run"
    assert tally(["passed", "passed", "skipped"]) == "2 passed, 1 skipped, 0 failed"
    assert tally(["xfailed", "failed", "not run"]) == \
        "0 passed, 1 xfailed, 0 skipped, 1 failed, 1 not run"


LOG = """\
## Detailed failed tests. ##
1. system-afxdp.at:3: testing AF_XDP - re-addition of failed ports ...
/src/tests/system-afxdp.at:18: grep "could not set configuration" ovs-vswitchd.log | wc -l
/src/tests/system-afxdp.at:22: check_logs "/ovs-p0: Too big 'n_rxq'/d
/ovs-p0: could not set configuration/d"
--- /dev/null	2026-12-04 07:50:07.445454750 +0000
+++ /build/tests/system-afxdp-testsuite.dir/at-groups/1/stdout	2026-12-04 18:00:54.627 +0000
@@ -0,0 +1,2 @@
+2026-12-04T18:00:49.335Z|00068|netdev_afxdp|ERR|setrlimit(RLIMIT_MEMLOCK) failed: Operation not permitted
+2026-12-04T18:00:50.335Z|00090|netdev_afxdp|ERR|setrlimit(RLIMIT_MEMLOCK) failed: Operation not permitted
ovs-vswitchd.log:
> 2026-12-04T18:00:49.042Z|00001|vlog|INFO|opened log file
1. system-afxdp.at:3: 1. AF_XDP - re-addition of failed ports (system-afxdp.at:3): FAILED (system-afxdp.at:22)

71. system-traffic.at:2551: testing conntrack - ping ...
/src/tests/system-traffic.at:2560: ovs-appctl dpctl/dump-conntrack | FORMAT_CT(10.1.1.2)
--- -	2026-12-04 07:50:07 +0000
+++ /build/tests/system-afxdp-testsuite.dir/at-groups/71/stdout	2026-12-04 18:00:54 +0000
@@ -1 +1 @@
-icmp,orig=(src=10.1.1.1)
+icmp,orig=(src=10.1.1.9)
71. system-traffic.at:2551: 71. conntrack - ping (system-traffic.at:2551): FAILED (system-traffic.at:2560)
"""


def test_failure_reasons_name_the_check_and_what_it_did_not_expect() -> None:
    assert failure_reasons(LOG) == {
        1: "system-afxdp.at:22 check_logs: netdev_afxdp|ERR|setrlimit(RLIMIT_MEMLOCK) failed: "
           "Operation not permitted",
        71: "system-traffic.at:2560 ovs-appctl dpctl/dump-conntrack | FORMAT_CT(10.1.1.2): "
            "icmp,orig=(src=10.1.1.9)",
    }
    assert failure_reasons("1. x.at:3: testing t ...\nall fine\n") == {}
    memlock = "check_logs: netdev_afxdp|ERR|setrlimit(RLIMIT_MEMLOCK) failed"
    assert failure_summary({3: f"a.at:22 {memlock}", 4: "b.at:9 ovs-ofctl dump-flows br0",
                            5: f"c.at:7 {memlock}", 6: f"c.at:8 {memlock}", 7: f"c.at:9 {memlock}"}) \
        == [(f"{memlock} (a.at:22, c.at:7, c.at:8, ...)", 4),
            ("ovs-ofctl dump-flows br0 (b.at:9)", 1)]


def test_the_collection_prints_the_ids_left_after_deselection() -> None:
    """bench/upstream_titles.py, collected for real: the ids -k leaves, each with its
    upstream title, file and flavour (and nothing for the ids -k deselected)."""
    def collect(*args: str) -> list[dict]:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
             "bench.upstream_titles", "--collect-only", "-q", *args], cwd=ROOT,
            capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return collected_cases(proc.stdout)

    found = collect("-m", "upstream", "-k", "test_ipv4_ping", "cases/system_userspace/test_system_ct.py",
                    "cases/system_afxdp/test_system_afxdp.py")
    assert {c["nodeid"].split("::")[1] for c in found} == {
        f"test_ipv4_ping[{f}]" for f in ("userspace", "tso", "afxdp", "dpdk")}
    afxdp = next(c for c in found if c["nodeid"].endswith("[afxdp]"))
    assert afxdp["upstream"] == "conntrack - IPv4 ping"
    assert afxdp["upstream_file"] == "system-traffic.at"
    assert afxdp["params"] == {"flavour": "afxdp"}
    every = collect("-m", "upstream", "cases/system_afxdp/test_system_afxdp.py")
    assert {c["upstream"] for c in every} == {"AF_XDP - infinite re-addition of failed ports",
                                              "AF_XDP - ping between pmd and non-pmd ports"}
    assert all(c["params"] == {} and c["upstream_file"] == "system-afxdp.at" for c in every)


def test_the_copy_tolerates_only_a_testsuite_run_in_the_tree() -> None:
    """cp -al of a build in which another testsuite runs: its files may vanish
    between cp's listing and its link; anything else missing stops the copy."""
    tree = Path("/c/build")
    gone = ("cp: cannot stat '/c/build/./tests/testsuite.dir/0012/ovs-vswitchd.log': No such "
            "file or directory\n"
            "cp: cannot create hard link '/c/copy/tests/testsuite.log' to "
            "'/c/build/./tests/testsuite.log': No such file or directory\n")
    assert not_linked(gone, tree) == ["tests/testsuite.dir/0012/ovs-vswitchd.log",
                                      "tests/testsuite.log"]
    assert not_linked("", tree) == []
    assert not_linked(gone + "cp: cannot stat '/c/build/./vswitchd/ovs-vswitchd': No such file\n",
                      tree) is None
    assert not_linked("cp: cannot stat '/c/build/./tests/atlocal': Permission denied\n",
                      tree) is None
