"""The report as a reviewer sees it: rendered from a real pytest run (passes, failures,
skips, an xfail) and opened in headless Chromium; and a 5,000-case report for size
and load time.  The browser checks skip when Chromium is not installed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.records import CaseRecord, Command, RunRecord, Step
from harness.wait import wait_until
from reports.browser import Browser, _group_members, find_chromium
from reports.plugin import output_dir
from reports.render import render

pytest_plugins = ["pytester"]

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (Debian package 'chromium'); "
                             "the report's browser checks need it")

SENT = ("ffffffffffff000000000001" "0800" "4500001e000100004011" "7ccc" "7f0000017f000001"
        "0001000200" "0a" "0000" "6869")
GOT = SENT.replace("7ccc", "1234")
MAX_INDEX_BYTES = 2_000_000
MAX_LOAD_SECONDS = 2.0

RUN_WITH_EVERY_OUTCOME = f'''
import pytest
from harness.records import Command, Step

SENT, GOT = "{SENT}", "{GOT}"


@pytest.mark.upstream("dpif-netdev - ip csum offload")
@pytest.mark.parametrize("state", ["good", "bad", "partial"])
@pytest.mark.parametrize("tx", ["tx_none", "tx_ip"])
def test_fwd(case_record, tx, state):
    if (tx, state) == ("tx_ip", "partial"):
        case_record.commands.append(Command(["ovs-vsctl", "--timeout=10", "--db=unix:/r/db.sock",
                                             "add-br", "br1"], 0, "", "", 0.01))
        case_record.commands.append(Command(["ovs-appctl", "netdev-dummy/receive", "p1", SENT],
                                            0, "", "", 0.001))
        case_record.steps.append(Step("fwd", "p1", "p2", [SENT], [SENT], [GOT], False,
                                      diff=["frame 0:", "  IP.chksum: expected 0x7ccc, got 0x1234"]))
        case_record.log_excerpt.append("t|00001|netdev_dummy|WARN|injected warning")
        raise AssertionError("IP.chksum: expected 0x7ccc, got 0x1234")


def test_needs_dpdk():
    pytest.skip("needs a DPDK build")


@pytest.mark.xfail(reason="known OVS bug", strict=True)
def test_known_bug():
    assert False
'''


def _screenshot(browser: Browser, report_dir: Path, config: pytest.Config, name: str) -> Path:
    """A screenshot in the report's folder, copied into the run's own output folder for CI."""
    path = Path(browser.screenshot(str(report_dir / name)))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    keep = output_dir(config) / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, keep / name)
    return path


@needs_chromium
def test_report_of_a_real_run_in_chromium(pytester: pytest.Pytester, pytestconfig: pytest.Config) -> None:
    pytester.makepyfile(test_inner=RUN_WITH_EVERY_OUTCOME)
    pytester.makeini("[pytest]\nmarkers =\n    upstream(title): the upstream test reproduced\n")
    result = pytester.runpytest("-p", "reports.plugin", "-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=5, failed=1, skipped=1, xfailed=1)
    out = pytester.path / "reports" / "out"
    with Browser(CHROMIUM) as browser:
        assert browser.proc is not None
        group = browser.proc.pid
        load = browser.open((out / "index.html").as_uri())
        assert load.errors == []
        page: Any = browser.evaluate("""({
            title: document.title,
            chips: [...document.querySelectorAll('#summary [data-only]')].map(b => b.textContent),
            failures: [...document.querySelectorAll('#failure-list td.mono')].map(td => td.textContent),
            rows: document.querySelectorAll('#cases tbody tr').length,
            shown: document.getElementById('shown').textContent,
            cells: document.querySelectorAll('#matrix td.cell:not(.empty)').length,
            red: [...document.querySelectorAll('#matrix td.c-failed')].map(td => td.textContent),
            axes: [...document.querySelectorAll('#axis-filters select')].map(s => s.dataset.axis),
            upstream: document.querySelector('nav a[href="upstream.html"]') !== null,
        })""")
        assert "1 failed" in page["title"]
        assert page["chips"] == ["1 failed", "1 xfailed", "1 skipped", "5 passed"]
        assert page["failures"] == ["test_inner.py::test_fwd[tx_ip-partial]"]
        assert page["rows"] == 8 and page["shown"].startswith("8 of 8")
        assert page["red"] == ["1/1"]  # rows test, columns tx x state: one cell holds the failure
        assert page["axes"][:1] == ["test"] and {"tx", "state"} <= set(page["axes"])
        assert page["upstream"]
        row_heads = "[...document.querySelectorAll('#matrix tr')].map(tr => tr.querySelector('th:not(.corner)'))" \
                    ".filter(th => th && th.parentNode.querySelector('td')).map(th => th.textContent)"
        assert browser.evaluate(row_heads) == ["test_fwd"]  # tests without parameters are left out
        assert browser.evaluate(f"""(() => {{ const box = document.getElementById('params-only');
            box.click(); const rows = {row_heads}; box.click(); return rows; }})()""") == [
            "test_fwd", "test_known_bug", "test_needs_dpdk"]
        _screenshot(browser, out, pytestconfig, "index.png")

        def table_after(script: str) -> Any:
            return browser.evaluate(f"""(() => {{ {script};
                return [...document.querySelectorAll('#cases tbody tr td.id')].map(td => td.textContent); }})()""")

        only_failed = table_after("document.querySelector('#summary [data-only=failed]').click()")
        assert only_failed == ["test_inner.py::test_fwd[tx_ip-partial]"]
        searched = table_after("document.getElementById('reset').click(); const q = document.getElementById('q');"
                               "q.value = 'tx_none good'; q.dispatchEvent(new Event('input'))")
        assert searched == ["test_inner.py::test_fwd[tx_none-good]"]
        clicked = table_after("document.getElementById('reset').click();"
                              "document.querySelector('#matrix td.c-failed').click()")
        assert clicked == ["test_inner.py::test_fwd[tx_ip-partial]"]
        regrouped = browser.evaluate("""(() => { document.getElementById('reset').click();
            const col = document.getElementById('col-1'); col.value = '-1'; col.dispatchEvent(new Event('change'));
            return [...document.querySelectorAll('#matrix td.c-failed')].map(td => [td.textContent, td.title]); })()""")
        assert regrouped == [["1/2", "test_fwd / partial: 1 failed, 1 passed"]]  # columns: state alone
        clicked = table_after("document.querySelector('#matrix td.c-failed').click()")
        assert sorted(clicked) == [f"test_inner.py::test_fwd[{tx}-partial]" for tx in ("tx_ip", "tx_none")]
        axes = browser.evaluate("""(() => { document.getElementById('reset').click();
            const pick = document.querySelector('#axis-filters select[data-axis=test]');
            pick.value = [...pick.options].find(o => o.textContent === 'test = test_fwd').value;
            pick.dispatchEvent(new Event('change'));
            const name = id => { const s = document.getElementById(id); return s.options[s.selectedIndex].text; };
            return [name('row-0'), name('col-0'), name('col-1'), document.querySelectorAll('#matrix td.cell').length];
        })()""")
        assert axes == ["test", "state", "tx", 6]  # one function: its own axes, one cell per case
        preview = browser.evaluate("""(() => { document.getElementById('reset').click();
            document.querySelector('#cases tbody button').click();
            const frame = document.querySelector('#cases tr.preview iframe');
            if (frame) frame.addEventListener('load', () => { window.previewLoaded = true; });
            return frame && frame.getAttribute('src'); })()""")
        assert preview and preview.startswith("case/test_fwd_tx_ip-partial") and (out / preview).is_file()
        # The preview's own load (its load event), then its console errors (none allowed).
        wait_until(lambda: browser.evaluate("window.previewLoaded === true"), 10,
                   what="the case preview's load event")
        assert browser.console_errors() == []

        case_page = next((out / "case").glob("test_fwd_tx_ip-partial*.html"))
        load = browser.open(case_page.as_uri())
        assert load.errors == []
        case: Any = browser.evaluate("""({
            id: document.getElementById('nodeid').textContent,
            differing: [...document.querySelectorAll('.fields td.d')].map(td => td.textContent),
            commands: document.querySelectorAll('#commands code').length,
            log: document.getElementById('vswitchd-log').textContent,
            repro: document.getElementById('repro-link').getAttribute('href'),
            pcaps: [...document.querySelectorAll('a.pcap-link')].map(a => a.getAttribute('href')),
        })""")
        assert case["id"] == "test_inner.py::test_fwd[tx_ip-partial]"
        assert case["differing"] == ["0x7ccc", "0x1234"]
        assert case["commands"] == 2 and "injected warning" in case["log"]
        assert (case_page.parent / case["repro"]).resolve().is_file()
        assert len(case["pcaps"]) == 3
        assert all((case_page.parent / href).resolve().is_file() for href in case["pcaps"])
        _screenshot(browser, out, pytestconfig, "case.png")

        load = browser.open((out / "upstream.html").as_uri())
        assert load.errors == []
        assert browser.evaluate("document.querySelectorAll('#trace-dpif-netdev-at tbody tr').length") == 48
        assert browser.evaluate("document.querySelectorAll('#trace-pmd-at tbody tr').length") == 20
        from harness.upstream import TESTSUITES
        assert browser.evaluate("document.querySelectorAll('#trace-files tbody tr').length") \
            == sum(len(ts.files) for ts in TESTSUITES)
        assert browser.evaluate("document.querySelector('#trace-dpif-netdev-at tr[data-status=failed] "
                                "td:nth-child(2)').textContent") == "dpif-netdev - ip csum offload"
    assert _processes_in_group(group) == [], "chromium left processes behind"


def _processes_in_group(group: int) -> list[str]:
    """Live processes of a process group, and zombies of it that are ours to reap."""
    left = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if pgrp == group and (state != "Z" or ppid == os.getpid()):
            left.append(f"{entry} {state}")
    return left


def test_close_waits_for_every_process_of_the_group(tmp_path: Path) -> None:
    """close() returns only when no process of the browser's group is left, the ones
    whose parent is not us included: a grandchild still dying after SIGKILL (state R
    on a loaded machine) once outlived close() and failed the check above. That exit's
    delay cannot be produced on demand, so this checks the property: the grandchild,
    not our child, is waited for too."""
    # leader -> middle -> grandchild in one new process group, as Chromium's helpers; the
    # leader exits at once, as Chromium does on Browser.close, and leaves the other two
    script = ("import subprocess, sys\n"
              "subprocess.Popen([sys.executable, '-c', "
              "'import subprocess, time; subprocess.Popen([\"sleep\", \"60\"]); time.sleep(60)'])\n")
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    proc.wait()
    wait_until(lambda: len(_group_members(proc.pid)) == 2, timeout=30,
               what="the leader's child and grandchild")
    assert [state for _, state, ours in _group_members(proc.pid) if not ours]  # the grandchild
    browser = Browser.__new__(Browser)
    browser.ws, browser.proc, browser.log = None, proc, None
    browser.profile = str(tmp_path / "profile")
    browser.close()
    assert _processes_in_group(proc.pid) == []


@needs_chromium
def test_browser_catches_console_errors(tmp_path: Path) -> None:
    """The pages' "no console errors" checks can fail: errors of every kind are caught."""
    page = tmp_path / "broken.html"
    page.write_text('<html><body><script>console.error("boom"); notDefined();</script>'
                    '<img src="missing.png"></body></html>')
    with Browser(CHROMIUM) as browser:
        errors = browser.open(page.as_uri()).errors
    assert any("console.error: boom" in e for e in errors)
    assert any("ReferenceError: notDefined is not defined" in e for e in errors)
    assert any("missing.png" in e for e in errors)


AXES = {
    "tunnel": ["vxlan", "geneve", "gre"],
    "underlay": ["ipv4", "ipv6"],
    "inner": ["tcp4", "udp4", "tcp6", "udp6"],
    "csum": ["csum_on", "csum_off"],
    "offloads": ["none", "ip", "l4", "l4_disabled", "out_ip", "out_udp", "out_udp_disabled"],
}
BACKENDS = ["dummy", "tap", "dpdk"]
FUNCTIONS = ["test_forward_into_tunnel", "test_decap", "test_tso_into_tunnel", "test_nested", "test_mirror"]


def synthetic_run(count: int) -> RunRecord:
    """`count` cases over the tunnel axes; about 2 % fail with full evidence."""
    cases: list[CaseRecord] = []
    combos = [(fn, be, t, u, i, c, o) for fn in FUNCTIONS for be in BACKENDS for t in AXES["tunnel"]
              for u in AXES["underlay"] for i in AXES["inner"] for c in AXES["csum"] for o in AXES["offloads"]]
    for n, (fn, be, t, u, i, c, o) in enumerate(combos[:count]):
        ident = f"{t}-{u}-{i}-{c}-{o}-{be}"
        case = CaseRecord(nodeid=f"cases/test_tunnel_csum.py::{fn}[{ident}]", outcome="passed",
                          duration=0.02 + (n % 7) / 100, backend=be, upstream=None,
                          params={"tunnel": t, "underlay": u, "inner": i, "csum": c, "offloads": o})
        if o == "out_udp_disabled" and c == "csum_on" and t == "geneve":
            case.outcome = "failed"
            case.longrepr = ("E   FrameMismatch: p1 -> t1 -> p2\nE   frame 0:\n"
                             "E     outer UDP.chksum: expected 0x454d, got 0xffff\n" + "context line\n" * 40)
            case.steps = [Step("forward", "p1", "p2", [SENT], [SENT], [GOT], False,
                               diff=["frame 0:", "  outer UDP.chksum: expected 0x454d, got 0xffff"])]
            case.commands = [Command(["ovs-vsctl", "--timeout=10", "--db=unix:/r/db.sock", "show"], 0,
                                     "x" * 200, "", 0.001)] * 20
            case.log_excerpt = [f"t|{k:05d}|dpif_netdev|DBG|line {k}" for k in range(100)]
        elif be == "dpdk" and u == "ipv6" and o == "none":
            case.outcome, case.longrepr = "skipped", "no DPDK vdev for this underlay"
        elif be == "tap" and fn == "test_nested" and c == "csum_off" and i == "udp6":
            case.outcome, case.longrepr = "xfailed", "XFAIL: known OVS bug"
        cases.append(case)
    return RunRecord(started="2025-01-01T00:00:00+00:00", duration=600.0, host="ci", backend="dummy, tap, dpdk",
                     versions={"ovs": "4.0.0", "dpdk": "25.11.4"}, cases=cases)


def test_index_of_5000_cases_stays_small(tmp_path: Path) -> None:
    run = synthetic_run(5000)
    assert len(run.cases) == 5000
    started = time.monotonic()
    index = Path(render(run, str(tmp_path)))
    size = index.stat().st_size
    print(f"\n5000 cases: index.html {size / 1e6:.2f} MB, rendered in {time.monotonic() - started:.1f} s")
    assert size < MAX_INDEX_BYTES
    html = index.read_text()
    assert "context line" not in html  # failure details live on the case pages only
    failed = sum(1 for c in run.cases if c.outcome == "failed")
    assert len(list((tmp_path / "case").iterdir())) == failed + sum(1 for c in run.cases if c.outcome == "xfailed")
    data = json.loads(html.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    ids = [data["prefixes"][prefix] + rest for (prefix, rest), *_ in data["cases"]]
    assert sorted(ids) == sorted(c.nodeid for c in run.cases)
    assert ids[:failed] == [c.nodeid for c in run.cases if c.outcome == "failed"]  # failures first


@needs_chromium
def test_index_of_5000_cases_opens_fast(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    run = synthetic_run(5000)
    index = Path(render(run, str(tmp_path)))
    with Browser(CHROMIUM) as browser:
        browser.open((tmp_path / "upstream.html").as_uri())  # warm the browser up: time the report only
        load = browser.open(index.as_uri())
        print(f"\n5000 cases: index.html loaded and drawn in {load.seconds:.3f} s")
        assert load.errors == []
        assert load.seconds < MAX_LOAD_SECONDS
        drawn: Any = browser.evaluate("""({
            rows: document.querySelectorAll('#cases tbody tr').length,
            shown: document.getElementById('shown').textContent,
            red: document.querySelectorAll('#matrix td.c-failed').length,
        })""")
        assert drawn["rows"] == 300 and drawn["shown"].startswith("5000 of 5000 cases match")
        assert drawn["red"] > 0
        _screenshot(browser, tmp_path, pytestconfig, "index-5000.png")


# The window a reviewer opens a run in: the first screen must answer what ran,
# what failed and where in the matrix, and nothing may be wider than the window.
SCREEN_WIDTH, SCREEN_HEIGHT = 1280, 800
SIGHTED_KEY, GONE_KEY = "gre-csum-at-push", "trunc-pending-csum"


def run_with_known_bugs(count: int) -> RunRecord:
    """The synthetic run, with the catalogue's entries: its xfails sight one, a failure
    saw another one gone, and one failure has a long id and a long message."""
    from datapath.model import bugs
    from fixtures.plugin import known_bug_facts
    from harness.records import known_bug_status

    run = synthetic_run(count)
    for case in run.cases:
        if case.outcome == "xfailed":
            case.steps = [Step("send", "p1", "p2", [], [], [], True, bugs={SIGHTED_KEY: "present"})]
    failed = [c for c in run.cases if c.outcome == "failed"]
    failed[0].steps.append(Step("send", "p1", "p2", [], [], [], True, bugs={GONE_KEY: "absent"}))
    failed[1].nodeid += "[" + "x" * 300 + "]"
    failed[1].longrepr = "E   FrameMismatch: " + "word " * 200
    run.known_bugs = known_bug_status([known_bug_facts(b) for b in bugs.ALL], run.cases)
    return run


FIRST_SCREEN = """(() => {
    const box = el => el ? el.getBoundingClientRect() : null;
    const firstCell = document.querySelector('#matrix td.cell');
    const firstCase = document.querySelector('a[href^="case/"]');
    return {
        width: document.documentElement.scrollWidth,
        viewport: document.documentElement.clientWidth,  // the window less its scrollbar
        summary: box(document.getElementById('summary')).bottom,
        ran: box(document.getElementById('what-ran')).bottom,
        ovs: document.getElementById('ovs').textContent,
        failures: box(document.querySelector('#failure-list tr')).bottom,
        matrix: firstCell ? box(firstCell).bottom : null,
        matrixTop: box(document.getElementById('matrix-section')).top,
        firstCase: firstCase && firstCase.textContent,
        firstCaseOutcome: firstCase && firstCase.closest('tr').querySelector('.o').textContent,
        firstCaseTop: firstCase && box(firstCase).top,
        firstSection: document.querySelector('body > section').id,
        bugLinks: [...document.querySelectorAll('a.bug-link')].map(a => a.getAttribute('href')),
        bugLines: [...document.querySelectorAll('#bug-list tr[data-status], #other-list tr[data-status]')]
            .map(tr => [tr.getBoundingClientRect().height, box(tr.querySelector('.o')).height]),
        // Each failure's links: [their box's height, one line of their font].
        linkLines: [...document.querySelectorAll('#failure-list td.links a')]
            .map(a => [box(a).height, parseFloat(getComputedStyle(a).lineHeight) ||
                       1.5 * parseFloat(getComputedStyle(a).fontSize)]),
    };
})()"""


@needs_chromium
def test_index_first_screen_at_1280(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """At 1,280 x 800: the run, the failures (a failure first of all cases) and the matrix's
    top on the first screen; no page wider than the window; each bug line one line high,
    linking to a page with the ids that sighted it."""
    run = run_with_known_bugs(5000)
    index = Path(render(run, str(tmp_path)))
    with Browser(CHROMIUM, width=SCREEN_WIDTH, height=SCREEN_HEIGHT) as browser:
        load = browser.open(index.as_uri())
        assert load.errors == []
        screen: Any = browser.evaluate(FIRST_SCREEN)
        assert screen["width"] <= screen["viewport"] <= SCREEN_WIDTH, "the index scrolls sideways"
        assert screen["ovs"] == "Open vSwitch 4.0.0" and screen["summary"] <= screen["ran"] <= SCREEN_HEIGHT
        assert screen["firstSection"] == "failures"
        assert screen["firstCaseOutcome"] == "failed" and screen["firstCase"].startswith(
            "cases/test_tunnel_csum.py::")
        assert screen["failures"] <= SCREEN_HEIGHT and screen["firstCaseTop"] < screen["matrixTop"]
        assert screen["linkLines"] and all(h <= line for h, line in screen["linkLines"]), \
            f"a failure's reproducer link wraps: {screen['linkLines'][:3]}"
        assert screen["matrix"] is not None and screen["matrix"] <= SCREEN_HEIGHT, \
            f"the matrix's first row ends at {screen['matrix']} px, below the first screen"
        _screenshot(browser, tmp_path, pytestconfig, "index-1280.png")
        assert len(screen["bugLinks"]) == len(run.known_bugs)
        assert all((tmp_path / href).is_file() for href in screen["bugLinks"])
        # A line no higher than two of its status badge (a one-line, never wrapped box).
        assert all(line < 2 * badge for line, badge in screen["bugLines"]), "a bug line wraps"

        load = browser.open((tmp_path / "bugs" / f"{SIGHTED_KEY}.html").as_uri())
        assert load.errors == []
        page: Any = browser.evaluate("""({
            width: document.documentElement.scrollWidth,
            viewport: document.documentElement.clientWidth,
            key: document.getElementById('bug-key').textContent,
            status: document.getElementById('bug-status').textContent,
            ids: [...document.querySelectorAll('#sightings a')].map(a => a.getAttribute('href')),
            fix: [...document.querySelectorAll('.export code')].map(c => c.textContent),
        })""")
        assert page["width"] <= page["viewport"], "the bug page scrolls sideways"
        assert page["key"] == SIGHTED_KEY and page["status"] == "present"
        xfailed = [c for c in run.cases if c.outcome == "xfailed"]
        assert len(page["ids"]) == len(xfailed) > 0
        assert all((tmp_path / "bugs" / href).resolve().is_file() for href in page["ids"])
        assert page["fix"] == [f"export/fixes/{SIGHTED_KEY}.patch"]
        _screenshot(browser, tmp_path, pytestconfig, "bug-1280.png")
        load = browser.open((tmp_path / "bugs" / f"{GONE_KEY}.html").as_uri())
        assert browser.evaluate("document.getElementById('bug-status').textContent") == "gone"
        assert browser.evaluate("document.documentElement.scrollWidth <= "
                                "document.documentElement.clientWidth")
