"""`./ovstest mutate`: mutation testing of a patch's lines (or a file's) in the datapath.

Stdlib only: this drives everything from the host, as tooling/gcovrun.py does.

1. Mutants: universalmutator (PyPI, installed with pip into the cache, never into
   the runtime or toolchain roots, whose keys stay as they are) writes mutants of
   the source file, restricted to the changed lines (its --lines); we write no
   mutation operator of our own.
2. Dropped before any run: lines that are only a comment, logging (VLOG_*) or an
   assertion (ovs_assert); mutants that do not compile; mutants whose object code
   (`objdump -d`, no debug sections) is that of the original.
3. Each mutant is built in the cached coverage build (tooling/ovsbuild.py): the
   source file replaced, its object made, ovs-vswitchd relinked.  The original
   source is always put back (finally, and on SIGINT/SIGTERM), and the build is
   remade from it at the end, so the cache stays valid.
4. The ids that reach a mutated line come from the reach `./ovstest coverage
   --patch` computes (gcovrun.patch_runs): its finest groups first, then the
   rest of the groups that reached the line (line_reach); only those run, with
   -x and a per-id timeout: a failure, a crash or a hang kills the mutant.
5. mutate.json and mutate.html: survivors first, per line its mutants and reach,
   a mutation score per file.  Exit 1 when a mutant survived, 0 when none did.
"""
from __future__ import annotations

import html
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from harness.runtime import LaunchError, cache_dir
from tooling import gcovrun
from tooling.idgroups import finest
from tooling.ovsbuild import Build, toolchain_run
from tooling.patchlines import FileChange, parse_diff, read_patch

UM_VERSION = "1.14.1"
DEFAULT_OUT = "reports/out-mutate"
DEFAULT_TIMEOUT = 120  # seconds per id (pytest-timeout): a mutant that hangs OVS is killed
# A line that is only one of these is not worth a reviewer's time.
NOT_WORTH = (
    re.compile(r"^\s*(//.*|/\*.*\*/|/?\*.*|\*/)?\s*$"),  # blank or comment only
    re.compile(r"^\s*VLOG_[A-Z_]+\s*\("),  # logging
    re.compile(r"^\s*ovs_assert\s*\("),  # assertions
)


def say(line: str) -> None:
    """Print a line of progress to stderr, prefixed."""
    print(f"ovstest mutate: {line}", file=sys.stderr, flush=True)


def source_lines(text: str) -> list[str]:
    """A file's lines split at newlines only (str.splitlines also splits at the form
    feeds OVS's sources have between sections), each with its newline."""
    return [
        ln + "\n" for ln in text.split("\n")[:-1]] + ([text.rsplit("\n", 1)[-1]]
                                                     if not text.endswith("\n") and text else [])


def worth_mutating(text: str) -> bool:
    """Whether a source line is more than a comment, a log call or an assertion."""
    return not any(p.match(text) for p in NOT_WORTH)


@dataclass
class Mutant:
    """One mutant of one line."""

    path: str  # relative to the tree's top
    line: int
    original: str
    mutated: str
    text: str = field(repr=False, default="")  # the whole mutated file
    state: str = "new"  # new, no-compile, equivalent, killed, survived, error
    killed_by: str | None = None
    seconds: float = 0.0

    @property
    def diff(self) -> str:
        return f"-{self.original.rstrip()}\n+{self.mutated.rstrip()}"


def mutants_of(original: str, mutated_texts: list[str], path: str) -> list[Mutant]:
    """The one-line mutants among these versions of a file (others are dropped)."""
    old = source_lines(original)
    out: list[Mutant] = []
    seen: set[tuple[int, str]] = set()
    for text in mutated_texts:
        new = source_lines(text)
        if len(new) != len(old):
            continue
        changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
        if len(changed) != 1 or (changed[0], new[changed[0]]) in seen:
            continue
        seen.add((changed[0], new[changed[0]]))
        out.append(Mutant(path, changed[0] + 1, old[changed[0]], new[changed[0]], text))
    return sorted(out, key=lambda m: (m.line, m.mutated))


def sample(mutants: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """A reproducible random sample of n mutants (all of them when n is None or more)."""
    if n is None or n >= len(mutants):
        return list(mutants)
    chosen = random.Random(seed).sample(range(len(mutants)), n)
    return [mutants[i] for i in sorted(chosen)]


def code_text(objdump: str) -> str:
    """`objdump -d` output without its file-name header: what two objects compare by."""
    return "\n".join(ln for ln in objdump.splitlines()
                     if ln.strip() and "file format" not in ln)


def lines_of_functions(source: str, functions: list[str]) -> set[int]:
    """The line numbers of these functions' bodies in a C file (OVS style: the
    name at the start of a line, the body's braces at column 0)."""
    lines = [ln.rstrip("\n") for ln in source_lines(source)]
    out: set[int] = set()
    for name in functions:
        starts = [i for i, ln in enumerate(lines) if re.match(rf"{re.escape(name)}\s*\(", ln)]
        for start in starts:
            i = start
            while i < len(lines) and lines[i] != "{":
                i += 1
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            out.update(range(i + 2, j + 1))
    return out


def line_reach(patch_runs: dict[str, Any], key: tuple[str, int]) -> list[str]:
    """The ids that may reach a line, in the order they run: the finest groups of
    `./ovstest coverage --patch`'s runs first (their run reached it), then the
    other ids of the coarser groups that reached it, smallest group first.  The
    bisection follows one path per line within its budget, so a group's sibling
    that was never run alone may reach the line too, and may be the id that
    notices the mutant; only an id whose own group ran without reaching the
    line is left out."""
    groups = patch_runs.get("groups", [])
    hits = [i for i, g in enumerate(groups) if key in {(p, n) for p, n in g["reached"]}]
    missed = {n for g in groups if key not in {(p, m) for p, m in g["reached"]}
              for n in g["nodeids"]}
    ids: list[str] = []
    for i in finest(groups, key):
        ids += [n for n in groups[i]["nodeids"] if n not in ids]
    for i in sorted(hits, key=lambda i: len(groups[i]["nodeids"])):
        ids += [n for n in groups[i]["nodeids"] if n not in ids and n not in missed]
    return ids


def killer(log: str) -> str | None:
    """The first id pytest reports as failed or errored in its short summary."""
    m = re.search(r"^(?:FAILED|ERROR) (\S+)", log, re.M)
    return m.group(1) if m else None


def rerun_command(ids: list[str]) -> str:
    """The command that runs these ids against the mutant's build."""
    return "./ovstest suite -x " + " ".join(f"'{n}'" for n in ids)


def scores(mutants: list[Mutant]) -> dict[str, dict[str, Any]]:
    """Per file: killed, survived, and the score (killed / (killed + survived))."""
    out: dict[str, dict[str, Any]] = {}
    for m in mutants:
        row = out.setdefault(m.path, {"killed": 0, "survived": 0, "dropped": 0, "score": None})
        if m.state in ("killed", "survived"):
            row[m.state] += 1
        elif m.state in ("no-compile", "equivalent"):
            row["dropped"] += 1
    for row in out.values():
        judged = row["killed"] + row["survived"]
        row["score"] = round(100.0 * row["killed"] / judged, 1) if judged else None
    return out


def report(mutants: list[Mutant], reach: dict[tuple[str, int], list[str]], what: str,
           reach_how: str) -> dict[str, Any]:
    """mutate.json's content: survivors first."""
    order = {"survived": 0, "killed": 1, "error": 2, "no-compile": 3, "equivalent": 4, "new": 5}
    rows = []
    for m in sorted(mutants, key=lambda m: (order[m.state], m.path, m.line)):
        ids = reach.get((m.path, m.line), [])
        d = {k: v for k, v in asdict(m).items() if k != "text"}
        rows.append({**d, "diff": m.diff, "reach": ids,
                     "rerun": rerun_command(ids) if ids else None})
    return {"what": what, "reach": reach_how, "scores": scores(mutants), "mutants": rows}


def render_html(data: dict[str, Any]) -> str:
    """mutate.html: the scores, then every mutant, survivors first."""
    e = html.escape
    score_rows = "".join(
        f"<tr><td class=mono>{e(p)}</td><td>{s['killed']}</td><td>{s['survived']}</td>"
        f"<td>{s['dropped']}</td><td>{'-' if s['score'] is None else str(s['score']) + '%'}</td></tr>"
        for p, s in data["scores"].items())
    rows = "".join(
        f"<tr class='{e(m['state'])}'><td class=mono>{e(m['path'])}:{m['line']}</td>"
        f"<td>{e(m['state'])}{' by ' + e(m['killed_by']) if m['killed_by'] else ''}</td>"
        f"<td><pre>{e(m['diff'])}</pre></td><td>{'<br>'.join(e(i) for i in m['reach']) or 'no id'}"
        f"{'<br><code>' + e(m['rerun']) + '</code>' if m['rerun'] else ''}</td></tr>"
        for m in data["mutants"])
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Mutation testing"
            "</title><style>tr.survived td{background:#fde0dc}tr.killed td{background:#e8f5e9}"
            "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}"
            ".mono,pre{font-family:monospace}</style></head><body>"
            f"<h1>Mutation testing</h1><p>{e(data['what'])}; reach: {e(data['reach'])}</p>"
            "<table><tr><th>file</th><th>killed</th><th>survived</th><th>dropped</th>"
            f"<th>score</th></tr>{score_rows}</table><h2>Mutants (survivors first)</h2>"
            "<table><tr><th>line</th><th>state</th><th>diff</th><th>reached by</th></tr>"
            f"{rows}</table></body></html>\n")


def write_report(out: Path, data: dict[str, Any]) -> None:
    """Write mutate.json and mutate.html."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutate.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "mutate.html").write_text(render_html(data))


def exit_code(mutants: list[Mutant]) -> int:
    """1 when a mutant survived, else 0."""
    return 1 if any(m.state == "survived" for m in mutants) else 0


# ----------------------------------------------------------------------------
# universalmutator, in the cache


def universalmutator() -> Path:
    """A directory with universalmutator installed (pip --target), cached by version."""
    target = cache_dir() / "tools" / f"universalmutator-{UM_VERSION}"
    if (target / "universalmutator" / "genmutants.py").is_file():
        return target
    say(f"installing universalmutator {UM_VERSION} into {target}")
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(tmp),
                           f"universalmutator=={UM_VERSION}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise LaunchError("pip install universalmutator failed: "
                          + (proc.stderr.strip().splitlines() or ["?"])[-1])
    # The 'typing' backport it pulls in would shadow the standard library's.
    (tmp / "typing.py").unlink(missing_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def generate(src: Path, path: str, lines: set[int], work: Path) -> list[Mutant]:
    """universalmutator's mutants of these lines of src/path (its CLI, --noCheck)."""
    tool = universalmutator()
    original = (src / path).read_text()
    text_lines = source_lines(original)
    wanted = sorted(n for n in lines if 0 < n <= len(text_lines)
                    and worth_mutating(text_lines[n - 1]))
    if not wanted:
        return []
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "mutants").mkdir()
    (work / "lines.txt").write_text("".join(f"{n}\n" for n in wanted))
    copy = work / Path(path).name
    copy.write_text(original)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from universalmutator.genmutants import main; "
         "sys.argv[0] = 'mutate'; sys.exit(main())", str(copy), "c", "--noCheck",
         "--lines", str(work / "lines.txt"), "--mutantDir", str(work / "mutants")],
        cwd=work, env={**os.environ, "PYTHONPATH": str(tool)}, capture_output=True, text=True)
    (work / "universalmutator.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise LaunchError(f"universalmutator failed (see {work / 'universalmutator.log'})")
    texts = [p.read_text() for p in sorted((work / "mutants").glob("*"))]
    return mutants_of(original, texts, path)


# ----------------------------------------------------------------------------
# Building and running mutants in the coverage build


@dataclass
class Options:
    """`./ovstest mutate`'s options."""

    patch: str | None = None
    file: str | None = None
    functions: list[str] = field(default_factory=list)
    sample: int | None = None
    seed: int = 0
    timeout: int = DEFAULT_TIMEOUT
    cwd: Path = Path(".")


class Restore:
    """Put the original source back, however the run ends (finally, SIGINT, SIGTERM)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.original = path.read_bytes()
        self.saved: dict[int, Any] = {}
        self.interrupted = False

    def __enter__(self) -> Restore:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.saved[sig] = signal.signal(sig, self._interrupted)
        return self

    def _interrupted(self, signum: int, frame: FrameType | None) -> None:
        # A sealed run waits for its pytest to clean up (tooling/seal.py swallows
        # the KeyboardInterrupt there): the loop checks `interrupted` after it.
        self.put_back()
        self.interrupted = True
        raise KeyboardInterrupt

    def put_back(self) -> None:
        if self.path.read_bytes() != self.original:
            self.path.write_bytes(self.original)

    def __exit__(self, *exc: object) -> None:
        self.put_back()
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def object_of(build_dir: Path, path: str) -> tuple[str, Path]:
    """(make target, object file) of a source of libopenvswitch in the build."""
    stem = Path(path).stem
    los = [p for p in (build_dir / Path(path).parent).glob("*.lo")
           if re.search(rf"(?:^|_la-){re.escape(stem)}$", p.stem)]
    if not los:
        raise LaunchError(f"{path}: no libtool object of it in {build_dir}")
    lo = los[0]
    text = lo.read_text()
    m = re.search(r"^non_pic_object='([^']+)'", text, re.M) or \
        re.search(r"^pic_object='([^']+)'", text, re.M)
    if not m:
        raise LaunchError(f"{lo}: names no object")
    return str(lo.relative_to(build_dir)), lo.parent / m.group(1)


def objdump(toolchain: Path, build: Build, obj: Path, log: Path) -> str:
    """`objdump -d` of an object, in the toolchain root (no debug sections: -d only)."""
    log.unlink(missing_ok=True)
    rc = toolchain_run(toolchain, ["objdump", "-d", "--no-show-raw-insn", str(obj)],
                       cwd=build.build, ro=(build.build,), log=log, timeout=600)
    return code_text(log.read_text(errors="replace")) if rc == 0 else ""


def check_patch_applies(spec: str, text: str, src: Path) -> None:
    """A patch file must be applied in the tree that was built (git apply -R --check)."""
    proc = subprocess.run(["git", "apply", "-R", "--check", "--unidiff-zero", "-"], input=text, cwd=src,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise LaunchError(f"--patch {spec}: the patch is not applied in {src} ({first})")


def changed_lines(options: Options, build: Build, datapath: list[str]
                  ) -> tuple[dict[str, FileChange], str]:
    """The lines to mutate and what they are; bad input raises LaunchError (one line)."""
    text = ""
    if options.patch:
        try:
            text, what = read_patch(options.patch, build.src, options.cwd)
        except ValueError as exc:
            raise LaunchError(str(exc)) from None
        changes = parse_diff(text)
        if not changes:
            raise LaunchError(f"--patch {options.patch}: the diff changes no line")
    else:
        assert options.file
        path = options.file
        if not (build.src / path).is_file():
            raise LaunchError(f"--file {path}: no such file in {build.src}")
        source = (build.src / path).read_text()
        lines = (lines_of_functions(source, options.functions) if options.functions
                 else set(range(1, source.count("\n") + 1)))
        if not lines:
            raise LaunchError(f"--functions {','.join(options.functions)}: none in {path}")
        changes, what = {path: FileChange(path, added=lines)}, f"--file {path}"
    outside = sorted(p for p in changes if p not in datapath)
    if outside:
        raise LaunchError(f"{outside[0]}: a changed line in no datapath file (DATAPATH_FILES "
                          "in tooling/gcovrun.py)")
    if options.patch and (".." not in options.patch or (options.cwd / options.patch).is_file()):
        check_patch_applies(options.patch, text, build.src)
    return changes, what


def drive(options: Options, toolchain: Path, build: Build, pytest_cmd: list[str],
          host_out: Path, seal: gcovrun.RuntimeSeal, rebuild: Callable[[], object],
          reach_dir: Path | None = None, budget: int = gcovrun.DEFAULT_PATCH_RUNS) -> int:
    """The whole mode once the build exists; returns the exit code."""
    changes, what = changed_lines(options, build, gcovrun.datapath_files(build.src))
    host_out.mkdir(parents=True, exist_ok=True)
    if reach_dir is not None:
        runs_file = reach_dir / "patch-runs.json"
        if not runs_file.is_file():
            raise LaunchError(f"--reach {reach_dir}: no patch-runs.json there")
        reach_how = f"from {runs_file}"
    else:
        reach_out = host_out / "reach"
        started = time.monotonic()
        rc = gcovrun.our_run(build, pytest_cmd, reach_out, seal)
        report_ = gcovrun.gcovr(toolchain, build, reach_out / "gcda", reach_out, sorted(changes),
                                "mutate: reach", html=False)
        groups = gcovrun.patch_runs(toolchain, build, changes, report_, pytest_cmd, reach_out,
                                    seal, budget)
        gcovrun.write_patch_data(reach_out, what, changes, groups, report_, budget)
        runs_file = reach_out / "patch-runs.json"
        reach_how = (f"./ovstest coverage --patch's selection once (pytest rc {rc}) and "
                     f"{len(groups)} group runs, {time.monotonic() - started:.0f} s")
        say(f"reach: {reach_how}")
    runs = json.loads(runs_file.read_text())
    reach = {(p, n): line_reach(runs, (p, n)) for p, c in changes.items() for n in c.lines}
    mutants: list[Mutant] = []
    for path, change in sorted(changes.items()):
        found = generate(build.src, path, set(change.lines), host_out / "mutants" / path)
        chosen = sample(found, options.sample, options.seed)
        say(f"{path}: {len(found)} mutants of {len(change.lines)} lines, {len(chosen)} chosen")
        mutants += chosen
    started = time.monotonic()
    try:
        for path in sorted({m.path for m in mutants}):
            run_file(toolchain, build, path, [m for m in mutants if m.path == path], reach,
                     pytest_cmd, host_out, seal, options.timeout)
    finally:
        say("rebuilding the original")
        rebuild()
    say(f"mutants: {time.monotonic() - started:.0f} s")
    data = report(mutants, reach, what, reach_how)
    write_report(host_out, data)
    for p, s in data["scores"].items():
        say(f"{p}: {s['killed']} killed, {s['survived']} survived, {s['dropped']} dropped, "
            f"score {s['score']}")
    return exit_code(mutants)


def run_file(toolchain: Path, build: Build, path: str, mutants: list[Mutant],
             reach: dict[tuple[str, int], list[str]], pytest_cmd: list[str], out: Path,
             seal: gcovrun.RuntimeSeal, timeout: int) -> None:
    """Build and run each mutant of one file; the original is back when this returns."""
    target, obj = object_of(build.build, path)
    work = gcovrun.fresh(out / "runs")
    rw = (build.src, build.build.parent)
    source = build.src / path
    with Restore(source) as restore:
        base = objdump(toolchain, build, obj, work / "original.objdump")
        for index, m in enumerate(mutants):
            if m.state != "new":
                continue
            here = gcovrun.fresh(work / f"m{index:03d}")
            (here / "diff.txt").write_text(m.diff + "\n")
            started = time.monotonic()
            source.write_text(m.text)
            log = here / "make.log"
            if toolchain_run(toolchain, ["make", target], cwd=build.build, rw=rw, log=log) != 0:
                m.state = "no-compile"
            elif objdump(toolchain, build, obj, here / "objdump.txt") == base:
                m.state = "equivalent"
            elif not reach[(m.path, m.line)]:
                m.state = "survived"  # it compiles to other code, and no id reaches its line
            elif toolchain_run(toolchain, ["make", "vswitchd/ovs-vswitchd"], cwd=build.build,
                               rw=rw, log=log) != 0:
                m.state = "no-compile"
            else:
                ids = reach[(m.path, m.line)]
                (here / "ids.txt").write_text("".join(f"{n}\n" for n in ids))
                say(f"mutant {index + 1}/{len(mutants)} {path}:{m.line}: {len(ids)} ids")
                rc = seal([*pytest_cmd, "-p", "tooling.idselect", "-x", "-n", "0", "-rfE",
                           f"--timeout={timeout}", f"--out-dir={gcovrun.sealed(here / 'run')}"],
                          {**gcovrun.gcov_env(build, gcovrun.fresh(here / "gcda")),
                           gcovrun.IDS_ENV: str(gcovrun.sealed(here / "ids.txt"))},
                          gcovrun.outside_checkout(out), here / "pytest.log")
                shutil.rmtree(here / "gcda", ignore_errors=True)
                if rc == 0:
                    m.state = "survived"
                elif rc == 1:
                    m.state = "killed"
                    m.killed_by = killer((here / "pytest.log").read_text(errors="replace"))
                else:
                    m.state = "error"
            m.seconds = round(time.monotonic() - started, 1)
            say(f"mutant {index + 1}/{len(mutants)} {path}:{m.line}: {m.state}"
                f"{' by ' + m.killed_by if m.killed_by else ''} ({m.seconds:.0f} s)")
            restore.put_back()
            if restore.interrupted:
                raise KeyboardInterrupt
