"""`./ovstest export --series DIR [--ovs-src SRC]`: our fixes as a `git format-patch` series.

export/fixes/ is the one source of the fixes: one file per root-cause group of
datapath/model/bugs.py, in the order export/fixes/series lists them.  A file is
a commit in the form OVS's contributors mail it (Documentation/internals/
contributing/submitting-patches.rst): a `Bugs:` line naming the catalogue
entries it cures (ours, not part of the commit), then `Subject:`, the commit
message (its `Fixes:` tag names the OVS commit that brought the bug in), `---`,
and the diff, the fix together with its test in upstream's testsuite.  No
Signed-off-by: whoever sends a patch certifies it (the Developer's Certificate
of Origin) and adds it.

The series is made against an OVS source tree, by default Debian's source of
the runtime's Open vSwitch (fetched and cached as `./ovstest coverage` does;
.ci/ovs-source-build caches the same): the files the series touches are copied
into a scratch git repository, every patch is applied in order (`git apply`,
which refuses any hunk that does not apply exactly) and committed, and
`git format-patch` writes the series, with a cover letter, into DIR.  Patches of
bugs that a guest or a remote host can trigger carry a disclosure note
(export/disclosures/KEY.md) for OVS's security process; DIR/SECURITY.txt says
which, and they are copied to DIR/disclosures/.

Stdlib only: it runs on the host (the runtime root has no git).
Exit status: 0 written; 1 a patch does not apply to SRC; 2 bad usage.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXES = HERE / "fixes"
SERIES = FIXES / "series"
DISCLOSURES = HERE / "disclosures"
FIXES_TAG = re.compile(r'^Fixes: (?P<sha>[0-9a-f]{12}) \("(?P<subject>.+)"\)$')
DEFAULT_AUTHOR = ("ovs-dpif-pytest", "ovs-dpif-pytest@example.invalid")


class SeriesError(Exception):
    """One line for the user; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Fix:
    """One root-cause group's fix: its catalogue entries, commit message and diff."""

    group: str
    bugs: tuple[str, ...]
    subject: str
    body: str  # the commit message after the subject line, Fixes: tags included
    diff: str

    @property
    def fixes_tags(self) -> list[tuple[str, str]]:
        """(12-hex commit, its subject) of each Fixes: tag."""
        return [(m.group("sha"), m.group("subject"))
                for m in map(FIXES_TAG.match, self.body.splitlines()) if m]

    @property
    def paths(self) -> list[str]:
        """The files the diff changes, as paths in the OVS tree."""
        return re.findall(r"^diff --git a/(\S+) b/\S+$", self.diff, re.M)

    @property
    def message(self) -> str:
        """The commit message: subject, blank line, body."""
        return f"{self.subject}\n\n{self.body.strip()}\n"


def parse(path: Path) -> Fix:
    """A fix file: `Bugs:` and `Subject:` lines, a blank line, the message, `---`, the diff."""
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n\n")
    fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    body, sep2, diff = rest.partition("\n---\n")
    if not sep or not sep2 or "Bugs" not in fields or "Subject" not in fields:
        raise SeriesError(f"{path.name}: not a fix file (Bugs: and Subject: lines, a blank "
                          "line, the message, '---', the diff)", code=2)
    return Fix(path.stem, tuple(fields["Bugs"].split()), fields["Subject"].strip(),
               body.strip() + "\n", diff.lstrip("\n"))


def load() -> list[Fix]:
    """Every fix, in the series' order."""
    names = [ln.strip() for ln in SERIES.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    files = {p.stem for p in FIXES.glob("*.patch")}
    unlisted = sorted(files - set(names))
    missing = [n for n in names if n not in files]
    if unlisted or missing or len(set(names)) != len(names):
        raise SeriesError(f"export/fixes/series and the patches disagree: not listed "
                          f"{unlisted}, no file for {missing}, or a name listed twice", code=2)
    return [parse(FIXES / f"{name}.patch") for name in names]


def disclosure(fix: Fix) -> list[Path]:
    """The disclosure notes of the fix's bugs (export/disclosures/KEY.md)."""
    return [DISCLOSURES / f"{key}.md" for key in fix.bugs
            if (DISCLOSURES / f"{key}.md").is_file()]


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    name, email = author()
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, text=True,
                          capture_output=True, env=env, check=False)
    if proc.returncode:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise SeriesError(f"git {' '.join(args[:2])}: {'; '.join(said)}")
    return proc.stdout


def author() -> tuple[str, str]:
    """Who the commits are by: GIT_AUTHOR_NAME/EMAIL, else git's user.name and
    user.email, else a placeholder the sender replaces."""
    name, email = os.environ.get("GIT_AUTHOR_NAME", ""), os.environ.get("GIT_AUTHOR_EMAIL", "")
    for key, value in (("user.name", name), ("user.email", email)):
        if not value:
            got = subprocess.run(["git", "config", "--get", key], capture_output=True,
                                 text=True, check=False).stdout.strip()
            if key == "user.name":
                name = got
            else:
                email = got
    return name or DEFAULT_AUTHOR[0], email or DEFAULT_AUTHOR[1]


def apply_series(src: Path, repo: Path, fixes: list[Fix]) -> str:
    """A scratch repository at `repo` with SRC's files the series touches, each
    fix applied and committed in order; returns the base commit."""
    repo.mkdir(parents=True)
    for rel in sorted({p for f in fixes for p in f.paths}):
        if not (src / rel).is_file():
            raise SeriesError(f"{src} has no {rel}: not an OVS source tree of this series")
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, repo / rel)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Open vSwitch source ({src.name})")
    base = _git(repo, "rev-parse", "HEAD").strip()
    for n, fix in enumerate(fixes, 1):
        try:
            _git(repo, "apply", "--index", "--whitespace=error-all", "-", stdin=fix.diff)
        except SeriesError as exc:
            raise SeriesError(f"patch {n} ({fix.group}.patch) does not apply to {src}: "
                              f"{exc}") from None
        _git(repo, "commit", "-q", "-F", "-", stdin=fix.message)
    return base


COVER = """\
These patches fix bugs of the userspace datapath that ovs-dpif-pytest, a pytest
suite that compares every frame leaving ovs-vswitchd with a model written from
the RFCs and OVS's documentation, found in OVS {version}.  Each patch fixes one
root cause, with a test in upstream's testsuite that fails without the fix and
passes with it.  They apply to OVS {version} and to the main branch.

{security}"""


def cover_letter(fixes: list[Fix], version: str) -> tuple[str, str]:
    """The cover letter's subject and blurb."""
    guarded = [f"  {n}/{len(fixes)} {f.subject}" for n, f in enumerate(fixes, 1) if disclosure(f)]
    security = ("Patches that fix bugs a guest or a remote host can trigger (a crash of\n"
                "ovs-vswitchd, a NAT bypass) are listed below; per OVS's security process\n"
                "(Documentation/internals/security.rst) they go to security@openvswitch.org\n"
                "first, with the disclosure notes in disclosures/, not to the public list:\n"
                + "\n".join(guarded) + "\n") if guarded else ""
    return (f"Userspace datapath fixes found by ovs-dpif-pytest (OVS {version}).",
            COVER.format(version=version, security=security).rstrip() + "\n")


def write(src: Path, out: Path, version: str = "") -> list[Path]:
    """The series against SRC, written into OUT; returns the patch files."""
    fixes = load()
    version = version or source_version(src)
    with tempfile.TemporaryDirectory(prefix="ovstest-series-") as tmp:
        repo = Path(tmp) / "ovs"
        base = apply_series(src, repo, fixes)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.patch"):
            old.unlink()
        _git(repo, "format-patch", "-q", "--zero-commit", "--no-signature", "--cover-letter",
             "--numbered", "-o", str(out), f"{base}..HEAD")
    paths = sorted(out.glob("*.patch"))
    subject, blurb = cover_letter(fixes, version)
    cover = paths[0]
    cover.write_text(cover.read_text().replace("*** SUBJECT HERE ***", subject)
                     .replace("*** BLURB HERE ***", blurb.rstrip()))
    notes = [(n, f, disclosure(f)) for n, f in enumerate(fixes, 1) if disclosure(f)]
    if notes:
        (out / "disclosures").mkdir(exist_ok=True)
        lines = ["Patches of bugs a guest or a remote host can trigger: report them to",
                 "security@openvswitch.org with their disclosure note before posting them.", ""]
        for n, fix, docs in notes:
            for doc in docs:
                shutil.copy2(doc, out / "disclosures" / doc.name)
            lines.append(f"{paths[n].name}: {', '.join('disclosures/' + d.name for d in docs)}")
        (out / "SECURITY.txt").write_text("\n".join(lines) + "\n")
    return paths


def source_version(src: Path) -> str:
    """The OVS version of a source tree (its configure.ac's AC_INIT)."""
    text = (src / "configure.ac").read_text() if (src / "configure.ac").is_file() else ""
    match = re.search(r"AC_INIT\(openvswitch, ([\w.]+)", text)
    return match.group(1) if match else ""


def default_source() -> Path:
    """Debian's source of the runtime's Open vSwitch, fetched and cached."""
    sys.path.insert(0, str(HERE.parent))
    from harness.runtime import LaunchError, provision
    from tooling.ovsbuild import debian_source
    try:
        return debian_source(provision())[0]
    except LaunchError as exc:
        raise SeriesError(str(exc), code=2) from None


def main(argv: list[str] | None = None) -> int:
    """`./ovstest export --series DIR [--ovs-src SRC]`."""
    parser = argparse.ArgumentParser(prog="ovstest export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", metavar="DIR", required=True,
                        help="where to write the git format-patch series")
    parser.add_argument("--ovs-src", metavar="SRC", help=(
        "the OVS source tree to make it against (default: Debian's source of the runtime's "
        "Open vSwitch, fetched and cached)"))
    args = parser.parse_args(argv)
    base = Path(os.environ.get("OVSTEST_CWD") or os.getcwd())
    try:
        src = (base / args.ovs_src).resolve() if args.ovs_src else default_source()
        paths = write(src, (base / args.series).resolve())
    except SeriesError as exc:
        print(f"ovstest export: error: {exc}", file=sys.stderr)
        return exc.code
    for path in paths:
        print(path)
    security = paths[0].parent / "SECURITY.txt"
    if security.is_file():
        print(f"ovstest export: {security}: patches to report to OVS's security team first",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
