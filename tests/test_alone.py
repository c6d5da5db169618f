"""fixtures/alone.py: an `alone` id runs while no other id of the run does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

INNER = '''
import json, os, time
from pathlib import Path
import pytest

LOG = Path(os.environ["ALONE_LOG"])

def spans(name):
    start = time.monotonic()
    time.sleep(0.3)
    with open(LOG, "a") as f:
        f.write(json.dumps([name, start, time.monotonic()]) + "\\n")

@pytest.mark.parametrize("n", range(8))
def test_together(n):
    spans(f"together{n}")

@pytest.mark.alone
def test_alone():
    spans("alone")

@pytest.mark.parametrize("n", range(8))
def test_after(n):
    spans(f"after{n}")
'''


def test_an_alone_id_overlaps_no_other(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    log = pytester.path / "spans.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("ALONE_LOG", str(log))
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "fixtures.alone", "-p", "xdist", "-n", "4",
                                           "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=17)
    spans = [json.loads(line) for line in log.read_text().splitlines()]
    (_, start, end), = [s for s in spans if s[0] == "alone"]
    others = [s for s in spans if s[0] != "alone"]
    assert len(others) == 16
    assert not [s for s in others if s[1] < end and start < s[2]], "an id ran beside the alone one"
    # Without the marker the same ids do overlap (the check can fail).
    log.unlink()
    pytester.makepyfile(test_inner=INNER.replace("@pytest.mark.alone", ""))
    pytester.runpytest_subprocess("-p", "fixtures.alone", "-p", "xdist", "-n", "4",
                                  "-p", "no:cacheprovider", "-q").assert_outcomes(passed=17)
    spans = [json.loads(line) for line in log.read_text().splitlines()]
    (_, start, end), = [s for s in spans if s[0] == "alone"]
    assert [s for s in spans if s[0] != "alone" and s[1] < end and start < s[2]]
