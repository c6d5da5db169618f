"""pmd-sleep-max in our set-up: on the afxdp and dpdk flavours of
system-traffic.at (their PMD threads would busy-poll a core each, taken from
the ids running beside them), nowhere a case checks PMD statistics or sleeps."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fixtures.system_userspace import system_traffic
from fixtures.system_userspace.system_traffic import FLAVOURS, PMD_SLEEP_MAX_US, flavour_env

ROOT = Path(__file__).resolve().parent.parent
# What reads PMD statistics or sleep settings (ovs-appctl dpif-netdev/..., harness/pmdstats.py).
CHECKS_PMDS = re.compile(r"pmd-stats-show|pmd-perf-show|pmd-sleep-show|pmdstats|pmd_stats")


def env_kwargs(flavour: str) -> dict[str, Any]:
    """The arguments the flavour's rig asks of the real_env factory."""
    seen: dict[str, Any] = {}

    def real_env(backend: str, **kwargs: Any) -> Any:
        seen.update(kwargs, backend=backend)
        return object()
    flavour_env(real_env, flavour)
    return seen


@pytest.mark.parametrize("flavour", ["afxdp", "dpdk"])
def test_pmd_flavours_let_idle_pmds_sleep(flavour: str) -> None:
    """Their vswitchd starts with other_config:pmd-sleep-max (vswitch.xml: 1 to
    10000 us), beside the backend's own other_config (RealEnv merges by key)."""
    kwargs = env_kwargs(flavour)
    assert kwargs["backend"] == FLAVOURS[flavour].backend
    assert kwargs["other_config"] == {"pmd-sleep-max": str(PMD_SLEEP_MAX_US)}
    assert 0 < PMD_SLEEP_MAX_US <= 10000


@pytest.mark.parametrize("flavour", ["userspace", "tso"])
def test_tap_flavours_are_upstreams(flavour: str) -> None:
    """No PMD polls a tap or system port: those flavours add nothing to upstream's."""
    assert "other_config" not in env_kwargs(flavour)


def sources(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_pmd_sleep_stays_off_where_pmds_are_checked() -> None:
    """pmd-sleep-max is set in one place (system_traffic.py); the cases that
    check PMD statistics or sleeps (pmd.at's among them, on the `sandbox`
    rig) never build their vswitchd through it."""
    mine = Path(system_traffic.__file__).resolve()
    setters = [p for p in sources("harness", "datapath", "fixtures", "perf")
               if "pmd-sleep-max" in p.read_text(encoding="utf-8") and p != mine]
    assert setters == []
    users = re.compile(r"\bsystem_traffic\b")
    checking = [str(p.relative_to(ROOT)) for p in sources("cases", "fixtures", "datapath")
                if p != mine and CHECKS_PMDS.search(text := p.read_text(encoding="utf-8"))
                and users.search(text)]
    assert checking == []
    pmd_cases = sources("cases/pmd")
    assert pmd_cases and not any(users.search(p.read_text(encoding="utf-8")) for p in pmd_cases)
