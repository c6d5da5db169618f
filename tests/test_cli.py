"""`./ovstest`'s front door (tooling/cli.py): every mode the parser accepts is in
`./ovstest --help` with one line on what it does and an example that parses to
it, `./ovstest MODE --help` works for each, and arguments reach the right place."""
from __future__ import annotations

import argparse
import re
import shlex

import pytest

from harness import concurrency
from harness.runtime import LaunchError
from tooling import cli, launcher

# The modes issue 19 asks the front door to list; more may come, none may go.
PROMISED = {"suite", "test", "compare", "perf", "bench", "export-at", "export", "provision", "shell",
            "flaky", "coverage"}
ENTRY = re.compile(r"^ {3}(\S+) {2,}(\S.*)$")  # "   suite      the dummy-backend suite ..."
EXAMPLE = re.compile(r"^ {4,}(\./ovstest\b.*)$")  # the line under it


def modes_of(parser: argparse.ArgumentParser) -> list[str]:
    """The mode names the parser accepts (its sub-parsers), read from the parser itself."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subs) == 1
    return list(subs[0].choices)


def help_entries(text: str) -> dict[str, tuple[str, str]]:
    """The mode table of a --help text: name -> (its line, the example under it)."""
    lines = text.splitlines()
    entries = {}
    for line, following in zip(lines, [*lines[1:], ""]):
        entry, example = ENTRY.match(line), EXAMPLE.match(following)
        if entry and example:
            entries[entry[1]] = (entry[2], example[1])
    return entries


def undocumented(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The modes of `parser` that `text` lacks, or lists without an example of that mode."""
    entries = help_entries(text)
    return [name for name in modes_of(parser)
            if name not in entries or not entries[name][1].startswith(f"./ovstest {name} ")]


def front_door(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What `./ovstest ARGV` prints, for ARGV a help request (it exits 0)."""
    with pytest.raises(SystemExit) as stop:
        launcher.main(list(argv))
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_mode_with_a_line_and_an_example(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = front_door(capsys, "--help")
    parser = cli.build_parser()
    assert PROMISED <= set(modes_of(parser))
    assert undocumented(parser, text) == []
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_mode_missing_from_help_is_caught(capsys: pytest.CaptureFixture[str]) -> None:
    """Negative control: a sub-parser added beside the mode table is reported."""
    text = front_door(capsys, "--help")
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    subs.add_parser("ghost")
    assert undocumented(parser, text) == ["ghost"]
    assert undocumented(parser, text.replace("./ovstest suite ", "./ovstest test ")) == \
        ["suite", "ghost"]


@pytest.mark.parametrize("mode", modes_of(cli.build_parser()))
def test_each_mode_has_help_of_its_own(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    example = help_entries(front_door(capsys, "--help"))[mode][1]
    text = front_door(capsys, mode, "--help")
    assert text.startswith(f"usage: ovstest {mode}")
    assert f"example:\n  {example}\n" in text
    for option in cli.by_name(mode).options:
        assert option.flag in text


@pytest.mark.parametrize("mode", modes_of(cli.build_parser()))
def test_each_example_parses_to_its_mode(mode: str, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OVS_BINDIR", raising=False)
    example = help_entries(front_door(capsys, "--help"))[mode][1]
    args, extra = cli.parse(shlex.split(example)[1:])
    assert args.mode == mode
    ours = {o.flag for m in cli.MODES for o in m.options} | {o.flag for o in cli.COMMON}
    assert [a for a in extra if a.split("=", 1)[0] in ours] == []  # none left unparsed


def test_options_before_or_after_the_mode_and_the_rest_in_order() -> None:
    args, extra = cli.parse(["--ovs-bindir", "a", "suite", "-q", "-k", "udp and x",
                             "cases/dpif_netdev/test_basic.py", "--out-dir=o"])
    assert (args.mode, args.ovs_bindir) == ("suite", "a")
    assert extra == ["-q", "-k", "udp and x", "cases/dpif_netdev/test_basic.py", "--out-dir=o"]
    args, _ = cli.parse(["flaky", "--ovs-bindir", "b", "--runs", "2"])
    assert (args.ovs_bindir, args.runs, args.stress) == ("b", "2", False)
    assert cli.parse(["shell", "echo", "--runs"])[1] == ["echo", "--runs"]  # a command's own


@pytest.mark.parametrize("argv,message", [
    (["suite", "--quick"], "--quick is for './ovstest perf'"),
    (["test", "--patch-runs=3"], "--patch and --patch-runs are for './ovstest coverage' "
     "and './ovstest mutate'"),
    (["test", "--baseline-upstream"], "--ovs-configure and --baseline-upstream are for "
     "'./ovstest coverage'"),
    (["suite", "--series", "x"], "--series, --readme and --check are for './ovstest export'"),
    (["test", "--ovs-src", "x"], "--ovs-src is for './ovstest export', './ovstest coverage', "
     "'./ovstest mutate' and './ovstest of-scope'"),
    (["suite", "--out", "x"], "--out is for './ovstest of-scope'"),
    (["flaky", "--candidate", "x"],
     "--baseline and --candidate are for './ovstest compare' and './ovstest perf'"),
])
def test_another_modes_option_is_refused(argv: list[str], message: str) -> None:
    with pytest.raises(LaunchError) as refused:
        cli.parse(argv)
    assert str(refused.value) == message


def test_export_needs_a_series_directory() -> None:
    with pytest.raises(LaunchError) as refused:
        cli.parse(["export"])
    assert str(refused.value) == "export needs --series DIR or --readme"
    for argv, message in ((["export", "--series", "d", "--readme"], "export needs --series DIR or --readme"),
                          (["export", "--series", "d", "--check"], "export: --check goes with --readme")):
        with pytest.raises(LaunchError) as refused:
            cli.parse(argv)
        assert str(refused.value) == message
    assert cli.parse(["export", "--readme", "--check"])[0].check
    args, extra = cli.parse(["export", "--series", "d", "--ovs-src", "s"])
    assert (args.series, args.ovs_src, extra) == ("d", "s", [])


@pytest.mark.parametrize("mode,args,expect", [
    ("suite", ["-q"], ["-n", "auto", "-q"]),
    ("test", ["cases/dpif_netdev/test_basic.py"], ["-n", "auto", "cases/dpif_netdev/test_basic.py"]),
    ("suite", ["-n", "0", "-q"], ["-n", "0", "-q"]),  # serial
    ("suite", ["-n4"], ["-n4"]),
    ("suite", ["-p", "no:xdist"], ["-p", "no:xdist"]),
    ("suite", ["cases/dpif_netdev/test_basic.py::test_receive"],
     ["cases/dpif_netdev/test_basic.py::test_receive"]),
    ("suite", ["--collect-only"], ["--collect-only"]),
    ("perf", ["-q"], ["-q"]), ("coverage", ["-q"], ["-q"]), ("flaky", ["-q"], ["-q"])])
def test_modes_run_concurrently_unless_the_arguments_choose(mode: str, args: list[str],
                                                            expect: list[str]) -> None:
    assert concurrency.with_default(mode, args) == expect
