"""`./ovstest`: provision the runtime, choose the OVS, run a mode sealed.

Stdlib only: this runs on the bare host before any dependency exists.  The
command line, its modes and their help are tooling/cli.py's; here each mode is
carried out: which OVS, which mounts (tooling/seal.py), which sealed command
(harness/runtime.py).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import concurrency
from harness.install import InstallError, Layout, find_layout
from harness.runtime import (
    OVS_PACKAGE,
    REPO_ROOT,
    LaunchError,
    hold,
    provision,
    runtime_versions,
    sealed_argv,
    upstream_version,
)
from tooling import cli, gcovrun
from tooling import flaky as flaky_driver
from tooling.ovsbuild import build as coverage_build
from tooling.ovsbuild import configure_flags, debian_source, toolchain_root
from tooling.seal import (
    exec_sealed,
    out_dir_mounts,
    results_mounts,
    run_sealed,
    sealed_path,
    user_path,
)

RUNTIME_WORDS = ("runtime", "packaged")
SYSTEM_DIRS = (Path("/"), Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"),
               Path("/etc"), Path("/var"), Path("/proc"), Path("/sys"), Path("/dev"))


@dataclass(frozen=True)
class Choice:
    """One OVS to run: a layout on the host, or the runtime's package (layout None)."""

    given: str | None
    chosen_by: str  # "--ovs-bindir", "OVS_BINDIR", "runtime", "--baseline", ...
    layout: Layout | None = None

    @property
    def mounts(self) -> tuple[Path, ...]:
        return self.layout.mounts if self.layout else ()

    def env(self) -> dict[str, str]:
        env = {"OVSTEST_OVS_CHOSEN": self.chosen_by}
        if self.layout is not None:
            env["OVS_BINDIR"] = str(self.layout.root)
        return env


def choose(given: str | None, chosen_by: str) -> Choice:
    """Resolve an OVS the user named (on the host); None or 'runtime' is the package."""
    if not given or given in RUNTIME_WORDS:
        return Choice(None, "runtime")
    try:
        layout = find_layout(str(user_path(given)))
    except InstallError as exc:
        raise LaunchError(str(exc)) from None
    refuse_system_dirs(layout.mounts, layout.root)
    return Choice(given, chosen_by, layout)


def refuse_system_dirs(mounts: tuple[Path, ...], root: Path) -> None:
    """A build is mounted at its own path: the host's system directories would hide
    the runtime's own."""
    for d in mounts:
        if d in SYSTEM_DIRS or any(s in d.parents for s in (Path("/proc"), Path("/sys"))):
            raise LaunchError(
                f"{root} is a directory of the host's own system, which cannot be mounted "
                "over the runtime's; install your build into a prefix of its own "
                "(./configure --prefix=/opt/ovs) or name its build tree")


def probe(root: Path, choice: Choice) -> dict[str, object]:
    """Check, inside the runtime, that the chosen OVS runs there: its version and
    its shared libraries.  Raises LaunchError with the probe's one line."""
    inner = ["python3", "-m", "harness.install",
             *([str(choice.layout.root)] if choice.layout else [])]
    argv, env = sealed_argv(root, inner, ro=choice.mounts)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        line = lines[-1] if lines else f"probe exited {proc.returncode}"
        raise LaunchError(line.removeprefix("ovstest: error: "))
    facts: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts


def inner_args(mode: str, extra: list[str]) -> list[str]:
    """python3's arguments for a mode."""
    if mode == "bench":
        return ["bench/bench_suite.py", *extra]
    if mode == "export-at":
        return ["-m", "export", *extra]
    targets = {"suite": ["cases"], "test": ["tests", "cases"], "compare": ["cases"],
               "flaky": ["cases"]}[mode]
    # Explicit paths or node ids in the checkout replace the default targets.
    if any(not a.startswith("-") and (REPO_ROOT / a.split("::")[0]).resolve().is_relative_to(
            REPO_ROOT) and (REPO_ROOT / a.split("::")[0]).exists() for a in extra):
        targets = []
    return ["-m", "pytest", *targets, *extra]


def note_runtime(root: Path, verbose: bool) -> None:
    """Print the runtime's versions (verbose), and one line when its OVS is not the
    one the known-bug list was last validated against."""
    versions = runtime_versions(root)
    if verbose:
        for package, version in versions.items():
            print(f"  {package} {version}")
    validated = validated_on()
    ovs = upstream_version(versions.get(OVS_PACKAGE, ""))
    if ovs and validated and ovs != validated:
        print(f"ovstest: note: the runtime's Open vSwitch is {ovs}; the known-bug list "
              f"(datapath/model/bugs.py) was last validated against {validated}",
              file=sys.stderr)


def validated_on() -> str:
    """bugs.VALIDATED_ON, read without importing the model (stdlib only here)."""
    import importlib.util
    path = REPO_ROOT / "datapath" / "model" / "bugs.py"
    spec = importlib.util.spec_from_file_location("_ovstest_bugs", path)
    if spec is None or spec.loader is None:
        return ""
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolves the module by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return str(getattr(module, "VALIDATED_ON", ""))


def compare(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    """Run the same selection on both builds, then compare their results."""
    sides = {"baseline": choose(args.baseline, "--baseline"),
             "candidate": choose(args.candidate, "--candidate")}
    facts = {name: probe(root, choice) for name, choice in sides.items()}
    if facts["baseline"]["identity"] == facts["candidate"]["identity"]:
        raise LaunchError(
            f"--baseline and --candidate are the same build ({facts['baseline']['describe']}); "
            "nothing to compare")
    rw: list[Path] = []
    out = sealed_path(Path(args.out_dir or "reports/out-compare"), rw)
    codes: dict[str, int] = {}
    for name, choice in sides.items():
        print(f"ovstest compare: {name}: {facts[name]['describe']}", file=sys.stderr)
        inner = ["python3", *inner_args("compare", concurrency.with_default("compare", extra)),
                 "--record-frames=all",
                 f"--out-dir={out / name}"]
        argv, env = sealed_argv(root, inner, ro=choice.mounts, rw=tuple(rw),
                                extra_env=choice.env())
        codes[name] = run_sealed(argv, env)
        if codes[name] not in (0, 1):  # 0 all passed, 1 some failed: both compare
            raise LaunchError(f"the {name} run ended with pytest exit code {codes[name]}; "
                              "nothing to compare")
    inner = ["python3", "-m", "tooling.buildcompare", str(out / "baseline"),
             str(out / "candidate"), "-o", str(out)]
    argv, env = sealed_argv(root, inner, rw=tuple(rw))
    return run_sealed(argv, env)


def perf(root: Path, args: argparse.Namespace, choice: Choice, extra: list[str]) -> int:
    """The `perf`-marked cases (deselected elsewhere).  With --baseline and
    --candidate (the same build is allowed: a noise check) both are mounted and
    measured in one run, interleaved point by point."""
    flags, mounts, env = ["--perf-quick"] if args.quick else [], choice.mounts, choice.env()
    if args.baseline and args.candidate:
        sides = [choose(args.baseline, "--baseline"), choose(args.candidate, "--candidate")]
        for name, side in zip(("baseline", "candidate"), sides):
            if side.layout is not None:
                probe(root, side)
            flags.append(f"--perf-{name}={side.layout.root if side.layout else 'runtime'}")
        mounts = tuple(dict.fromkeys(m for side in sides for m in side.mounts))
        env = {"OVSTEST_OVS_CHOSEN": "--baseline/--candidate"}
    elif choice.layout is not None:
        probe(root, choice)
    if not any(a == "--out-dir" or a.startswith("--out-dir=") for a in extra):
        extra = ["--out-dir", "reports/out-perf", *extra]
    extra, rw = out_dir_mounts(extra)
    inner = ["python3", "-m", "pytest", "cases/throughput/test_perf.py", "-m", "perf", *flags, *extra]
    sealed, sealed_env = sealed_argv(root, inner, ro=mounts, rw=rw, extra_env=env)
    return exec_sealed(sealed, sealed_env)


def flaky(root: Path, options: flaky_driver.Options, choice: Choice, extra: list[str]) -> int:
    """The selection several times, each run a sealed pytest of its own writing to
    run-NN/ under the flaky output directory (tooling/flaky.py drives them)."""
    given, extra = flaky_driver.pop_out_dir(extra)
    rw: list[Path] = []
    host_out = user_path(given or flaky_driver.DEFAULT_OUT)
    sealed_out = sealed_path(host_out, rw)

    def seal(inner: list[str], env: dict[str, str], log: Path) -> int:
        argv, sealed_env = sealed_argv(root, inner, ro=choice.mounts, rw=tuple(rw),
                                       extra_env={**choice.env(), **env})
        return run_sealed(argv, sealed_env, log)

    return flaky_driver.drive(options, inner_args("flaky", extra), host_out, sealed_out, seal)


def coverage(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    """Build OVS with gcov (cached), run the selection against it, report the
    datapath's coverage (tooling/gcovrun.py drives the runs)."""
    try:
        patch_runs = int(args.patch_runs)
    except ValueError:
        raise LaunchError(f"--patch-runs {args.patch_runs}: not a number") from None
    given, extra = flaky_driver.pop_out_dir(extra)
    host_out = user_path(given or gcovrun.DEFAULT_OUT)
    toolchain = toolchain_root()
    if args.ovs_src:
        src, origin, boot = user_path(args.ovs_src), f"--ovs-src {args.ovs_src}", False
    else:
        (src, origin), boot = debian_source(root), True
    build = coverage_build(toolchain, src, origin, configure_flags(args.ovs_configure), boot)
    choice = choose(str(build.build), "ovstest coverage")
    probe(root, choice)

    def seal(inner: list[str], env: dict[str, str], rw: tuple[Path, ...],
             log: Path | None) -> int:
        argv, sealed_env = sealed_argv(root, ["python3", *inner], ro=choice.mounts, rw=rw,
                                       extra_env={**choice.env(), **env})
        return run_sealed(argv, sealed_env, log)

    def render(inner: list[str]) -> int:
        argv, env = sealed_argv(root, ["python3", "-m", "tooling.gcov_pages", *inner],
                                rw=gcovrun.outside_checkout(host_out))
        return run_sealed(argv, env)

    options = gcovrun.Options(ovs_src=args.ovs_src, configure=args.ovs_configure,
                              baseline_upstream=args.baseline_upstream, patch=args.patch,
                              patch_runs=patch_runs, cwd=user_path("."))
    return gcovrun.drive(options, toolchain, build, inner_args("suite", extra), host_out,
                         seal, render)


def mutate(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    """Mutants of a patch's (or a file's) lines built in the coverage build, each
    run by the ids that reach its line (tooling/mutate.py drives them)."""
    from tooling import mutate as mutate_driver

    def number(flag: str, value: str | None, default: int | None) -> int | None:
        try:
            return default if value is None else int(value)
        except ValueError:
            raise LaunchError(f"{flag} {value}: not a number") from None

    sample = number("--sample", args.sample, None)
    seed = number("--seed", args.seed, 0) or 0
    timeout = number("--id-timeout", args.id_timeout, mutate_driver.DEFAULT_TIMEOUT)
    budget = number("--patch-runs", args.patch_runs, gcovrun.DEFAULT_PATCH_RUNS)
    given, extra = flaky_driver.pop_out_dir(extra)
    host_out = user_path(given or mutate_driver.DEFAULT_OUT)
    toolchain = toolchain_root()
    if args.ovs_src:
        src, origin, boot = user_path(args.ovs_src), f"--ovs-src {args.ovs_src}", False
    else:
        (src, origin), boot = debian_source(root), True
    flags = configure_flags(None)
    build = coverage_build(toolchain, src, origin, flags, boot)
    choice = choose(str(build.build), "ovstest mutate")

    def seal(inner: list[str], env: dict[str, str], rw: tuple[Path, ...],
             log: Path | None) -> int:
        argv, sealed_env = sealed_argv(root, ["python3", *inner], ro=choice.mounts, rw=rw,
                                       extra_env={**choice.env(), **env})
        return run_sealed(argv, sealed_env, log)

    options = mutate_driver.Options(
        patch=args.patch, file=args.file,
        functions=[f for f in (args.functions or "").split(",") if f],
        sample=sample, seed=seed, timeout=timeout or mutate_driver.DEFAULT_TIMEOUT,
        cwd=user_path("."))
    return mutate_driver.drive(
        options, toolchain, build, inner_args("suite", extra), host_out, seal,
        lambda: coverage_build(toolchain, src, origin, flags, boot),
        reach_dir=user_path(args.reach) if args.reach else None,
        budget=budget or gcovrun.DEFAULT_PATCH_RUNS)


def of_scope(root: Path, args: argparse.Namespace, extra: list[str]) -> int:
    """The OpenFlow scope list (tooling/of_scope.py), sealed: the source tree
    mounted read-only, the report's directory read-write."""
    from tooling.of_scope import DEFAULT_NAME, DEFAULT_OUT

    if extra:
        raise LaunchError(f"of-scope takes --ovs-src DIR and --out FILE, not {extra[0]}")
    src = user_path(args.ovs_src) if args.ovs_src else debian_source(root)[0]
    out = user_path(args.out or f"{DEFAULT_OUT}/{DEFAULT_NAME}")
    rw: list[Path] = []
    sealed_out = sealed_path(out.parent, rw) / out.name
    inner = ["python3", "-m", "tooling.of_scope", "--ovs-src", str(src), "--out", str(sealed_out)]
    argv, env = sealed_argv(root, inner, ro=(src,), rw=tuple(rw))
    code = exec_sealed(argv, env)
    if code == 0:
        print(f"ovstest of-scope: wrote {out}")
    return code


def main(argv: list[str] | None = None) -> int:
    """Run `./ovstest` (tooling/cli.py parses the line); return its exit status."""
    try:
        args, extra = cli.parse(argv)  # exits on --help; bad input fails before provisioning
        if args.mode == "bench" and any(a.startswith(("--upstream-tree", "--concurrency"))
                                        for a in extra):
            # Upstream's testsuite runs on the host (its tree's binaries are the host's);
            # these scripts start `./ovstest suite` for our side, sealed as usual.
            script = "upstream_ratio.py" if any(a.startswith("--upstream-tree") for a in extra) \
                else "concurrency.py"
            sys.stdout.flush()
            os.execv(sys.executable, [sys.executable, str(REPO_ROOT / "bench" / script), *extra])
        if args.mode == "export":
            # git runs on the host (the runtime root has none); the source is
            # fetched and cached, as for coverage, unless --ovs-src names one.
            if extra:
                raise LaunchError(f"export takes --series DIR and --ovs-src SRC, not {extra[0]}")
            sys.stdout.flush()
            if args.readme:  # stdlib only, on the host: the catalogue is loaded by path
                os.execv(sys.executable, [sys.executable, str(REPO_ROOT / "export" / "readme.py"),
                                          *(["--check"] if args.check else [])])
            src = ["--ovs-src", str(user_path(args.ovs_src))] if args.ovs_src else []
            os.execv(sys.executable, [sys.executable, str(REPO_ROOT / "export" / "series.py"),
                                      "--series", str(user_path(args.series)), *src])
        # The seed is drawn here, once.
        options = flaky_driver.parse_options(args.runs, args.stress, args.seed) \
            if args.mode == "flaky" else None
        out_dir = None
        if args.mode == "compare" and "--out-dir" in extra:  # compare places its runs itself
            i = extra.index("--out-dir")
            out_dir = extra[i + 1] if i + 1 < len(extra) else None
            del extra[i:i + 2]
        args.out_dir = out_dir
        given, how = args.ovs_bindir, "--ovs-bindir"
        if given is None and os.environ.get("OVS_BINDIR"):
            given, how = os.environ["OVS_BINDIR"], "OVS_BINDIR"
        choice = choose(given, how) if args.mode not in ("provision", "compare", "coverage",
                                                         "mutate", "of-scope") \
            else None
        root = provision(force=args.rebuild_runtime)
        if args.mode == "provision":
            print(root)
            note_runtime(root, verbose=True)
            return 0
        note_runtime(root, verbose=False)
        hold(root)  # inherited by the sealed run: this root stays while it runs
        if args.mode == "compare":
            return compare(root, args, extra)
        if args.mode == "coverage":
            return coverage(root, args, extra)
        if args.mode == "mutate":
            return mutate(root, args, extra)
        if args.mode == "of-scope":
            return of_scope(root, args, extra)
        assert choice is not None
        if args.mode == "perf":
            return perf(root, args, choice, extra)
        if options is not None:
            if choice.layout is not None:
                probe(root, choice)
            return flaky(root, options, choice, extra)
        if choice.layout is not None:
            probe(root, choice)
        extra, rw = out_dir_mounts(extra)
        if args.mode == "export-at":
            more: list[Path] = []
            extra = results_mounts(extra, more)
            rw = rw + tuple(more)
        if args.mode == "shell":  # interactive, or one command line
            inner = ["/bin/bash", "-c", " ".join(extra)] if extra else ["/bin/bash", "-i"]
        else:
            inner = ["python3", *inner_args(args.mode, concurrency.with_default(args.mode, extra))]
        sealed, env = sealed_argv(root, inner, ro=choice.mounts, rw=rw, extra_env=choice.env())
        return exec_sealed(sealed, env)
    except LaunchError as exc:
        print(f"ovstest: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
