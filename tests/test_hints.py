"""Every hint works where it is printed: a flag it names exists on that command, a key it names
exists in the table, a command it names parses.

Hints come from :mod:`hatch_shrinkray.hints` (and the messages that call it); they are collected
twice: by calling every hint function for each interface, and from what the CLI and a hook build
actually print on tiny models. Each backquoted span is then checked against the interface it was
printed in."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from hardening import MODEL, backend_project, build, cli, write_project

from hatch_shrinkray import hints
from hatch_shrinkray.cli import _split_command, parser
from hatch_shrinkray.option_table import OPTIONS
from hatch_shrinkray.shipping.config import _HOOK_KEYS, ENGINE_KEYS

from onnx_builders import mlp, save

INTERFACES = (hints.HOOK, "shrink", "wheel", "check")
REQUIRED = {"shrink": ["m.onnx", "-o", "out"], "wheel": ["w.whl"], "check": [], "compare": ["a.onnx", "b.onnx"]}
"""What each command needs besides the flags a hint names, to parse."""
TABLE_KEYS = {*ENGINE_KEYS, *_HOOK_KEYS}
BLANKS = {"N": "1", "NAME": "batch"}


def _parses(argv: list[str]) -> str:
    """Why ``hatch-shrinkray ARGV`` does not parse ('' when it does)."""
    own, _ = _split_command(argv)
    try:
        parser().parse_args(own)
    except SystemExit as exc:
        return f"does not parse (exit {exc.code})"
    return ""


def _filled(text: str) -> str:
    """``text`` with the blanks a user fills in (``N``) filled."""
    return re.sub(r"\b[A-Z]+\b", lambda m: BLANKS.get(m[0], m[0]), text)


def _options(command: str) -> set[str]:
    """The flags ``command`` accepts."""
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for action in sub.choices[command]._actions for flag in action.option_strings}


def _spans(text: str) -> Iterator[str]:
    yield from re.findall(r"`([^`\n]+)`", text)


def problems(text: str, interface: str) -> list[str]:
    """What in ``text`` does not work in ``interface`` (the hook's table or a command's flags)."""
    found = []
    for span in _spans(text):
        if span.startswith("hatch-shrinkray "):
            why = _parses(shlex.split(span)[1:])
        elif span.startswith("-") and interface != hints.HOOK and re.fullmatch(r"--[a-z][a-z0-9-]*", span):
            why = "" if span in _options(interface) else f"no flag {span} on {interface}"  # the flag's name
        elif span.startswith("-"):
            why = ("a flag in a build, which takes no flags" if interface == hints.HOOK else
                   _parses([interface, *REQUIRED[interface], *shlex.split(_filled(span))]))
        elif match := re.fullmatch(r"([a-z][a-z0-9-]*) = (.+)", span):
            key, value = match.groups()
            if key not in TABLE_KEYS:
                why = f"no key {key!r} in the table"
            elif interface != hints.HOOK and key in hints.FLAGS:
                why = f"a key on the command line, where {hints.FLAGS[key]} sets it"
            else:
                try:
                    tomllib.loads(f"{key} = {_filled(value)}")
                    why = ""
                except tomllib.TOMLDecodeError as exc:
                    why = f"not TOML ({exc})"
        else:
            continue
        if why:
            found.append(f"`{span}` ({interface}): {why}")
    return found


def test_the_checker_catches_what_the_hints_once_said() -> None:
    """The hints that did not work where they were printed are caught."""
    assert problems("lower `--models.samples` or `--models.dims batch=N`", "wheel")
    assert problems('set `inputs = "DIR"`', "shrink") and problems('`exclude-tensors = ["W1"]`', "check")
    assert problems("pass `--inputs DIR`", hints.HOOK)
    assert problems("`hatch-shrinkray check --search --levels x -- python -m pytest`", "check")
    assert problems("`levles = 3`", hints.HOOK) and problems("lower `--sample`", "shrink")
    assert not problems('`inputs = "DIR"` and `hatch-shrinkray record --output DIR -- COMMAND`', hints.HOOK)


@pytest.mark.parametrize("interface", INTERFACES)
def test_every_hint_function_speaks_the_interface(interface: str) -> None:
    invocation = hints.Invocation(interface, ("--method", "int8"), ("python", "-m", "pytest", "-x"), ("pkg/m.onnx",))
    with hints.speaking(invocation.installed() if interface == "wheel" else invocation):
        _every_hint_speaks(interface)


def _every_hint_speaks(interface: str) -> None:
    from hatch_shrinkray.fitting.sensitivity import keep_hint

    samples: dict[str, hints.Value] = {
        "method": "fp16", "min-elements": 1024, "exclude-tensors": ["W1", "conv.*"], "exclude-ops": ["Gather"],
        "dedup": False, "verify": False, "scheme": "symmetric", "levels": hints.Blank("N"), "decode": "float",
        "block-size": 32, "target": "web", "runtimes": ["onnxruntime>=1.17"], "budget-rel-l2": 0.01,
        "budget-cosine": 0.999, "budget-agreement": 0.99, "budget-load": 2.0, "encodings": {"W1": "fp16"},
        "inputs": "DIR", "dims": {"batch": hints.Blank("N")}, "default-dim": 8, "samples": hints.Blank("N"),
        "int-range": [0, 64], "max-rel-l2": 0.1, "min-cosine": 0.995, "min-agreement": 0.99,
        "judges": {"probability_map": "map"}, "rounding": "nearest"}
    samples.update({o.key: bool(o.const) for o in OPTIONS if o.kind == "boolean" and o.key not in samples})
    assert set(samples) == set(hints.FLAGS)
    texts = [hints.record_hint(), hints.check_hint(), hints.check_hint("python -m pytest tests"),
             *(hints.setting(k, v) for k, v in samples.items()), *(hints.set_it(k, v) for k, v in samples.items())]

    class Ranked:
        def __init__(self, name: str) -> None:
            self.name, self.load, self.encoding = name, 1.0, "int8"
            self.deviation = argparse.Namespace(rel_l2=0.01, top1=1.0, decides=False)

    texts.append(keep_hint([Ranked("W1"), Ranked("layer.0/weight")]))  # type: ignore[list-item]
    assert all(hints.key(k) in (k, hints.FLAGS[k]) for k in hints.FLAGS)
    found = [p for text in texts for p in problems(text, interface)]
    assert found == []
    spoken = "".join(texts)
    assert ("--inputs DIR" in spoken) == (interface != hints.HOOK)
    assert ('inputs = "DIR"' in spoken) == (interface == hints.HOOK)


def _checked(printed: dict[str, list[str]]) -> None:
    found = [p for interface, texts in printed.items() for text in texts for p in problems(text, interface)]
    assert found == []


def test_what_shrink_prints_works_on_its_command_line(tmp_path: Path) -> None:
    """Generated inputs (record real ones), a verification failure (the tensors to keep, and
    ``check``), generated inputs too large (the options to lower)."""
    model = save(mlp(), tmp_path / "m.onnx")
    smoke = cli("shrink", str(model), "-o", str(tmp_path / "out"))
    failed = cli("shrink", str(model), "-o", str(tmp_path / "out2"), "--max-rel-l2", "1e-9", "--judges", "y=values",
                 "--strict")
    big = cli("shrink", str(model), "-o", str(tmp_path / "out3"), "--samples", "100000000", "--dims", "batch=100000")
    assert "record real inputs" in smoke.stdout and "pass it as `--inputs`" in smoke.stdout
    assert failed.returncode == 1 and "`--exclude-tensors W1`" in failed.stderr, failed.stderr
    assert "`hatch-shrinkray check --fix " in failed.stderr
    assert big.returncode == 1 and "`--samples`" in big.stderr and "`--dims batch=N`" in big.stderr, big.stderr
    _checked({"shrink": [smoke.stdout + smoke.stderr, failed.stdout + failed.stderr, big.stderr]})


def test_what_wheel_prints_without_a_table_names_flags_and_installed_files(tmp_path: Path) -> None:
    """``wheel --models`` with no pyproject table: options are named by their flags (never
    ``--models.samples``), and ``check`` is pointed at the installed files, which it can read."""
    from hatchling.builders.wheel import WheelBuilder

    project = backend_project(tmp_path / "toymodel")
    wheel = next(WheelBuilder(str(project)).build(directory=str(tmp_path / "dist"), versions=["standard"]))
    args = ("wheel", wheel, "-o", str(tmp_path / "out"), "--models", "toymodel/models/*.onnx")
    failed = cli(*args, "--max-rel-l2", "1e-9", "--judges", "y=values", "--strict", cwd=tmp_path)
    big = cli(*args, "--samples", "100000000", cwd=tmp_path)
    assert failed.returncode == 1 and "`--exclude-tensors W1`" in failed.stderr, failed.stderr
    assert f"check --fix '{hints.SITE}toymodel/models/*.onnx' --max-rel-l2 1e-09 --judges y=values --strict -- " \
        in failed.stderr, failed.stderr
    assert big.returncode == 1 and "`--samples`" in big.stderr and "--models." not in big.stderr, big.stderr
    _checked({"wheel": [failed.stderr, big.stderr]})


def test_what_a_build_prints_names_keys_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    root = write_project(tmp_path / "toymodel", 'max-rel-l2 = 1e-9\nstrict = true\njudges = { y = "values" }\n')
    save(mlp(), root / MODEL)
    with pytest.raises(SystemExit):
        build(root)
    err = capsys.readouterr().err
    assert '`exclude-tensors = ["W1"]`' in err and "`--exclude-tensors" not in err, err
    _checked({hints.HOOK: [err]})


def test_the_cli_leaves_the_hooks_words_behind_in_process(tmp_path: Path) -> None:
    """``main`` run in process (as a test or a tool embedding the CLI does) speaks flags while it
    runs and leaves the hook's words for whatever the process does next."""
    from hatch_shrinkray.cli import main

    missing = tmp_path / "absent.onnx"
    assert main(["shrink", str(missing), "-o", str(tmp_path / "out")]) == 1
    assert hints.current() == hints.Invocation()
    assert hints.set_it("inputs", "DIR") == 'set `inputs = "DIR"`'
