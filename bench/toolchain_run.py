"""Run a command sealed in the toolchain root (tooling/ovsbuild.py), in a directory
of the host that it may write to: build an OVS tree there, or run its testsuite,
with the compilers and libraries the runtime's OVS was built with.

    python3 bench/toolchain_run.py DIR -- COMMAND [ARG...]

DIR is bind-mounted read-write at its own path; the checkout is /src inside.
Example (an in-tree build of a copy of Debian's source, then the exported
tests without and with their fixes):

    python3 bench/toolchain_run.py /tmp/ovs-4.0 -- sh -c './boot.sh && ./configure && make -j2'
    python3 bench/toolchain_run.py /tmp/ovs-4.0 -- bash /src/bench/export_at_check.sh --fixes /tmp/ovs-4.0

Exit status: the command's; 2 for bad usage or a root that cannot be provisioned.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.runtime import LaunchError  # noqa: E402
from tooling.ovsbuild import toolchain_root, toolchain_run  # noqa: E402


def main(argv: list[str]) -> int:
    """Run COMMAND in DIR inside the toolchain root; 2 on bad usage or a launch error."""
    if len(argv) < 3 or argv[1] != "--" or not Path(argv[0]).is_dir():
        print("usage: python3 bench/toolchain_run.py DIR -- COMMAND [ARG...] (DIR: an existing "
              "directory)", file=sys.stderr)
        return 2
    where = Path(argv[0]).resolve()
    try:
        return toolchain_run(toolchain_root(), argv[2:], cwd=where, rw=(where,), timeout=4 * 3600)
    except LaunchError as exc:
        print(f"toolchain_run: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
