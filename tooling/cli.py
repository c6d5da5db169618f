"""`./ovstest`'s command line: its modes, their options, and the help that shows them.

Stdlib only: the launcher (tooling/launcher.py) parses its arguments on the bare
host, before any dependency exists.  Each mode is one `Mode` record, from which
both its sub-parser and its lines in `./ovstest --help` are made, so a mode
cannot exist without its one-line summary and its example.  Arguments a mode
does not know go on to what it runs (pytest, a bench script, the exporter); an
option of another mode among them is refused rather than passed on.
"""
from __future__ import annotations

import argparse
import os
import textwrap
from dataclasses import dataclass
from typing import Any

from harness.runtime import LaunchError
from tooling import flaky as flaky_driver
from tooling import gcovrun

PURPOSE = "Provision the runtime, choose the OVS, run pytest sealed."
WHICH_OVS = """\
Which OVS runs: the one --ovs-bindir DIR (or OVS_BINDIR) names, an install prefix,
its bin/ or sbin/, or a build tree; otherwise the provisioned runtime's package.
Nothing on PATH is picked.  Every run is sealed in the runtime root (see
harness/runtime.py), with a build bind-mounted read-only at its own path."""
PYTEST_ARGS = ("Other arguments go to pytest (./ovstest shell 'cd /src && python3 -m pytest --help' "
               "lists them); --out-dir DIR moves the report.  The ids run several at a time "
               "(pytest-xdist's -n auto: fixtures/schedule.py chooses the workers and their "
               "order); -n 0 runs them one after another, -n N with N workers.")


@dataclass(frozen=True)
class Option:
    """One option of `./ovstest` or of a mode: its flag and argparse's keywords."""

    flag: str
    kwargs: dict[str, Any]

    @property
    def dest(self) -> str:
        """The attribute the parsed namespace holds it under."""
        return str(self.kwargs.get("dest", self.flag.lstrip("-").replace("-", "_")))

    @property
    def default(self) -> object:
        """Its value when not given."""
        return self.kwargs.get("default", False if self.kwargs.get("action") == "store_true" else None)


@dataclass(frozen=True)
class Mode:
    """One mode: a line on what it does, an example, and what `MODE --help` adds."""

    name: str
    summary: str
    example: str
    usage: str  # what follows `ovstest MODE` on the usage line
    details: str = ""
    options: tuple[Option, ...] = ()


COMMON = (
    Option("--ovs-bindir", dict(metavar="DIR", help=(
        "the OVS to test: an install prefix, its bin/ or sbin/, or a build tree "
        "(default: $OVS_BINDIR, else the provisioned runtime's OVS)"))),
    Option("--rebuild-runtime", dict(action="store_true",
                                     help="provision the runtime root again even if cached")),
)
BASELINE = Option("--baseline", dict(metavar="A", help=(
    "the OVS to compare against (a build, a prefix, or 'runtime' for the provisioned package)")))
CANDIDATE = Option("--candidate", dict(metavar="B", help="the OVS under review (as --baseline)"))

MODES: tuple[Mode, ...] = (
    Mode("suite", "the dummy-backend suite (cases/), HTML report in reports/out/",
         "./ovstest suite -q -k 'udp and rx_partial'", "[PYTEST ARGS]", PYTEST_ARGS),
    Mode("test", "everything: the framework's unit tests (tests/) and the cases",
         "./ovstest test -q tests/test_model.py", "[PYTEST ARGS]", PYTEST_ARGS),
    Mode("compare", "the same selection on two OVS builds, and what changed between them",
         "./ovstest compare --baseline runtime --candidate ~/ovs -k vxlan",
         "--baseline A --candidate B [--out-dir DIR] [PYTEST ARGS]",
         "Both runs record every frame; tooling.buildcompare writes the comparison to DIR "
         "(default reports/out-compare/).",
         (BASELINE, CANDIDATE)),
    Mode("perf", "datapath throughput sweep (perf/): perf.html and its plots",
         "./ovstest perf --quick",
         "[--quick] [--baseline A --candidate B] [--out-dir DIR] [PYTEST ARGS]",
         "Runs the perf-marked cases (deselected elsewhere), report in reports/out-perf/.  With "
         "--baseline and --candidate both builds are measured in one run, interleaved point by "
         "point (the same build twice is a noise check).",
         (Option("--quick", dict(action="store_true",
                                 help="one point per topology, one repeat (three for A/B)")),
          BASELINE, CANDIDATE)),
    Mode("bench", "the framework's own timings (bench/), or upstream's testsuite against ours",
         "./ovstest bench --concurrency --areas",
         "[--n N] [-k EXPR] [--upstream-seconds S] | --upstream-tree DIR [-k EXPR] [--jobs N] "
         "[--testsuite check-afxdp,check-dpdk] | --concurrency [--workers N,...] [--areas] "
         "[-k EXPR]",
         "Without --upstream-tree or --concurrency: bench/bench_suite.py, sealed (sandbox start, "
         "one step, the cases' wall time).  With --upstream-tree DIR: bench/upstream_ratio.py "
         "on the host, upstream's tests of DIR against ours, per upstream file (with --testsuite: "
         "per flavour testsuite, check-afxdp and check-dpdk).  With "
         "--concurrency: bench/concurrency.py, the main job serial (-n 0) against concurrent, "
         "per area (fixtures/areas.py)."),
    Mode("export-at", "a case, or the minimal case of a known bug, as an upstream .at test",
         "./ovstest export-at gre-csum-at-push",
         "ID... [--out-dir DIR] [--results FILE]",
         "ID is a pytest node id or a known-bug key of datapath/model/bugs.py.  Writes "
         "DIR/NAME.at (the Autotest test for dpif-netdev.at) and DIR/NAME.txt (a report), "
         "default reports/out-export/; --results FILE chooses from an earlier run's results.json "
         "(export/cli.py)."),
    Mode("export", "our fixes as a patch series against OVS's tree, or the README's bug section",
         "./ovstest export --series /tmp/series",
         "--series DIR [--ovs-src SRC] | --readme [--check]",
         "Writes DIR/0000-cover-letter.patch and one patch per root cause of "
         "datapath/model/bugs.py, each the fix with its test in upstream's testsuite, made "
         "against SRC (default: Debian's source of the runtime's Open vSwitch, fetched and "
         "cached); DIR/SECURITY.txt names the patches whose bugs a guest or a remote host can "
         "trigger, with their disclosure notes in DIR/disclosures/ (export/series.py).  Exit "
         "status 1 when a patch does not apply to SRC.  With --readme: rewrites README.md's "
         "known-bug section (between its marker comments) from the catalogue's entries "
         "(export/readme.py); --check only says whether it is current (exit 1 if not).",
         (Option("--series", dict(metavar="DIR", help="where to write the series")),
          Option("--readme", dict(action="store_true", help=(
              "rewrite README.md's known-bug section from datapath/model/bugs.py"))),
          Option("--check", dict(action="store_true", help=(
              "with --readme: only check that the section is current"))),
          Option("--ovs-src", dict(metavar="SRC", help=(
              "the OVS source tree to make the series against (default: Debian's source "
              "of the runtime's version, fetched and cached)"))))),
    Mode("provision", "only build (or check) the cached runtime root, and print its versions",
         "./ovstest provision --rebuild-runtime", ""),
    Mode("shell", "a shell, or one command line, inside the sealed runtime (checkout at /src)",
         "./ovstest shell 'cd /src && ruff check . && mypy'",
         "[COMMAND...]"),
    Mode("flaky", "the selection N times in shuffled orders; exit 1 if an id is flaky or failing",
         "./ovstest flaky --runs 3 --stress cases/dpif_netdev/test_basic.py",
         "[--runs N] [--stress] [--seed S] [--out-dir DIR] [PYTEST ARGS]",
         "Writes flaky.txt/json per id in reports/out-flaky/ (tooling/flaky.py).",
         (Option("--runs", dict(metavar="N",
                                help=f"how many runs (default {flaky_driver.DEFAULT_RUNS})")),
          Option("--stress", dict(action="store_true", help=(
              "a calm run 0, then runs 1..N under one busy loop per CPU, the even ones also "
              "with pytest -n 2"))),
          Option("--seed", dict(metavar="S",
                                help="run k shuffles with seed S+k (default: drawn, and printed)")))),
    Mode("coverage", "the selection against a gcov build of OVS: the datapath's coverage",
         "./ovstest coverage --patch HEAD~1..HEAD --ovs-src ~/ovs",
         "[--ovs-src DIR] [--ovs-configure FLAGS] [--baseline-upstream] [--patch FILE|REV..REV] "
         "[--patch-runs N] [--out-dir DIR] [PYTEST ARGS]",
         "Builds OVS with gcov (cached), runs the selection, writes coverage.html/.json of the "
         "datapath's files in reports/out-coverage/ (tooling/gcovrun.py).",
         (Option("--ovs-src", dict(metavar="DIR", help=(
             "the OVS source tree to build with gcov (default: Debian's source of the runtime's "
             "version, fetched and cached)"))),
          Option("--ovs-configure", dict(metavar="FLAGS", help=(
              "configure flags besides --enable-coverage (default: '--with-dpdk=shared')"))),
          Option("--baseline-upstream", dict(action="store_true", help=(
              "also upstream's testsuite (the tests of dpif-netdev.at, pmd.at, "
              "tunnel-push-pop*.at) on the same build, side by side"))),
          Option("--patch", dict(metavar="FILE|REV..REV", help=(
              "a patch (file, or git range in --ovs-src): which changed lines are reached, "
              "and by which ids"))),
          Option("--patch-runs", dict(metavar="N", default=str(gcovrun.DEFAULT_PATCH_RUNS), help=(
              f"with --patch: at most N group runs to find the ids "
              f"(default {gcovrun.DEFAULT_PATCH_RUNS})"))))),
    Mode("mutate", "mutation testing of a patch's (or a file's) datapath lines in the gcov build",
         "./ovstest mutate --patch fix.patch --sample 3 cases/dpif_netdev/test_basic.py",
         "(--patch FILE|REV..REV | --file lib/X.c [--functions F,...]) [--sample N --seed S] "
         "[--reach DIR] [--ovs-src DIR] [--id-timeout S] [--out-dir DIR] [PYTEST ARGS]",
         "Mutants of the changed lines by universalmutator, built one by one in `coverage`'s "
         "cached build; the ids that reach a line (found as coverage --patch does, or read "
         "from --reach DIR's patch-runs.json) run with -x.  Writes mutate.html/.json in "
         "reports/out-mutate/ (tooling/mutate.py); exit 1 if a mutant survived.",
         (Option("--ovs-src", dict(metavar="DIR", help=(
             "the OVS source tree (default: Debian's source of the runtime's version)"))),
          Option("--patch", dict(metavar="FILE|REV..REV", help="the patch whose lines to mutate")),
          Option("--file", dict(metavar="PATH", help="mutate this datapath file instead")),
          Option("--functions", dict(metavar="F,...", help="with --file: only these functions")),
          Option("--sample", dict(metavar="N", help="a random sample of N mutants per file")),
          Option("--seed", dict(metavar="S", help="with --sample: the sample's seed (default 0)")),
          Option("--reach", dict(metavar="DIR", help=(
              "an earlier `coverage --patch` output directory: its patch-runs.json says "
              "which ids reach which line"))),
          Option("--patch-runs", dict(metavar="N", default=str(gcovrun.DEFAULT_PATCH_RUNS), help=(
              "without --reach: at most N group runs to find the ids"))),
          Option("--id-timeout", dict(metavar="S", help=(
              "seconds an id may take against a mutant (pytest-timeout; a hang kills it)"))))),
    Mode("of-scope", "the match fields and actions upstream's .at files install, against the model",
         "./ovstest of-scope --out /tmp/of-scope.md",
         "[--ovs-src DIR] [--out FILE]",
         "Reads the flows that ovs-ofctl add-flow, add-flows, mod-flows, replace-flows and "
         "bundle install in the .at files this suite reproduces, and separately in "
         "ofproto-dpif.at, through the model's normalisation (datapath/model/openflow/), and "
         "counts per match field and action how many flows use it, in which files, and whether "
         "the model interprets it; a flow with a shell expansion or an m4 macro is counted "
         "unreadable with its file:line.  Prints the totals and writes FILE, markdown (default "
         "reports/out-of-scope/of-scope.md; tooling/of_scope.py).",
         (Option("--ovs-src", dict(metavar="DIR", help=(
             "the OVS source tree whose tests/ to read (default: Debian's source of the "
             "runtime's version, fetched and cached)"))),
          Option("--out", dict(metavar="FILE", help="the markdown file to write")))),
)
MODE_NAMES = tuple(m.name for m in MODES)


def overview() -> str:
    """`./ovstest --help`'s text above the options: every mode, what it does, an example."""
    width = max(len(name) for name in MODE_NAMES) + 2
    lines = [PURPOSE, "", "Modes (./ovstest MODE --help tells more of one):"]
    for mode in MODES:
        lines += [f"   {mode.name:<{width}}{mode.summary}", f"   {'':<{width}}{mode.example}"]
    return "\n".join([*lines, "", WHICH_OVS])


def build_parser() -> argparse.ArgumentParser:
    """The parser: `./ovstest`'s own options, then one sub-parser a mode."""
    parser = argparse.ArgumentParser(
        prog="ovstest", usage="%(prog)s [--ovs-bindir DIR] [--rebuild-runtime] MODE [ARGS...]",
        description=overview(), formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    for option in COMMON:
        parser.add_argument(option.flag, **option.kwargs)
    # Every mode's options are in the namespace, whichever mode was chosen.
    parser.set_defaults(**{o.dest: o.default for m in MODES for o in m.options})
    modes = parser.add_subparsers(dest="mode", required=True, metavar="MODE",
                                  help=argparse.SUPPRESS)
    for mode in MODES:
        sub = modes.add_parser(
            mode.name, prog=f"ovstest {mode.name}", usage=f"%(prog)s {mode.usage}".rstrip(),
            description="\n\n".join(textwrap.fill(p, 80) for p in (mode.summary + ".", mode.details) if p),
            epilog=f"example:\n  {mode.example}", allow_abbrev=False,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        for option in mode.options:
            sub.add_argument(option.flag, **option.kwargs)
        for option in COMMON:
            # Also accepted after the mode; SUPPRESS keeps a value given before it.
            sub.add_argument(option.flag, **{**option.kwargs, "default": argparse.SUPPRESS})
    return parser


def refuse_foreign(mode: str, extra: list[str]) -> None:
    """Raise LaunchError for another mode's option among the arguments passed on."""
    if mode == "shell":  # a command line, its words its own
        return
    owners: dict[str, tuple[str, ...]] = {}
    for m in MODES:
        for option in m.options:
            owners[option.flag] = (*owners.get(option.flag, ()), m.name)
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if mode not in owners.get(flag, (mode,)):
            group = [f for f, names in owners.items() if names == owners[flag]]
            modes = [f"'./ovstest {name}'" for name in owners[flag]]
            raise LaunchError(f"{_and(group)} {'is' if len(group) == 1 else 'are'} for {_and(modes)}")


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def by_name(name: str) -> Mode:
    """The mode called `name`."""
    return next(m for m in MODES if m.name == name)


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The mode and its options, and the arguments passed on to what it runs.

    argparse exits on --help and on a malformed line; a line of the wrong mode's
    options raises LaunchError (before anything is provisioned)."""
    args, extra = build_parser().parse_known_args(argv)
    refuse_foreign(args.mode, extra)
    if args.mode == "compare" and not (args.baseline and args.candidate):
        raise LaunchError("compare needs --baseline A and --candidate B "
                          "(a build, a prefix, or 'runtime')")
    if args.mode == "perf" and bool(args.baseline) != bool(args.candidate):
        raise LaunchError("perf: --baseline and --candidate go together")
    if args.mode == "export" and bool(args.series) == bool(args.readme):
        raise LaunchError("export needs --series DIR or --readme")
    if args.mode == "export" and args.check and not args.readme:
        raise LaunchError("export: --check goes with --readme")
    if args.mode == "coverage" and (args.ovs_bindir or os.environ.get("OVS_BINDIR")):
        raise LaunchError("coverage builds its own OVS: name the source tree with --ovs-src, "
                          "not --ovs-bindir or OVS_BINDIR")
    if args.mode == "mutate" and bool(args.patch) == bool(args.file):
        raise LaunchError("mutate needs --patch FILE|REV..REV or --file lib/X.c")
    if args.mode == "mutate" and args.functions and not args.file:
        raise LaunchError("mutate: --functions goes with --file")
    if args.mode == "mutate" and (args.ovs_bindir or os.environ.get("OVS_BINDIR")):
        raise LaunchError("mutate uses the coverage build: name the source tree with "
                          "--ovs-src, not --ovs-bindir or OVS_BINDIR")
    return args, extra
