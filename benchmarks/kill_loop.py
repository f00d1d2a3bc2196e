"""Kills at random points of every command that writes: does each end the documented way?

Each trial starts one command as a user runs it (the console script, or hatchling building a project
with the hook), sends it SIGTERM or SIGINT (Ctrl-C) at a random moment of its run, and checks:

* the exit: death by SIGTERM itself (-15, 143 in a shell), or 130 after Ctrl-C (a hook build too:
  hatch/stopping.py); a signal before the handlers exist (the interpreter starting, hatchling not yet
  running the hook) ends the process Python's way and is not counted against it; the last line says ``terminated``
  or ``interrupted`` and no traceback is printed. Death by any other signal (-11, -6) is a crash;
* nothing half-written: no temporary file (``*.tmp``, a staging or work directory) in the trial's
  TMPDIR, output directory, cache or project; an output that exists is complete (a wheel whose
  every entry reads back and matches RECORD, a model onnx.checker accepts, a recording whose arrays
  all load, a plan file that is the old one or valid JSON);
* not swallowed: a run that exits 0 more than 2 s after its signal caught and dropped it;
* no orphan: no process that carries the trial's token in its environment is left 15 s after the
  command ended (the watchdog of ``record`` and ``check`` stops their commands within 5 s).

A run that finished before its signal was due is checked the same way and not counted as a kill.

    python -m benchmarks.kill_loop --kills 500 --seed 1 --report benchmarks/KILLS.md

The commands: ``wheel`` (a wheel holding a 100 MB model: the run CI saw die by SIGSEGV), ``shrink``
and a hook build (hatchling in a fresh process) of a 38 MB model, ``record`` (a script that runs two
models 40 times) and ``check --fix`` (a script whose tolerance int8's fitted codes miss, so the fix
searches). Timings are measured once per
command before the trials; the signal falls uniformly within 1.05 times that run's length.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIN = Path(sys.executable).parent
CONSOLE = str(BIN / "hatch-shrinkray")
ORPHAN_WAIT = 15.0
STOP_WAIT = 180.0
SWALLOWED = 2.0
"""An exit 0 this long after the signal means the signal was caught and dropped, not that it came late."""

PYPROJECT = textwrap.dedent('''\
    [build-system]
    requires = ["hatchling", "hatch-shrinkray-core"]
    build-backend = "hatchling.build"

    [project]
    name = "{name}"
    version = "0.1.0"

    [tool.hatch.build.targets.wheel]
    packages = ["src/{name}"]
    exclude = ["*.log"]

    [tool.hatch.build.hooks.shrinkray]
    models = ["src/{name}/models/*.onnx"]
    {extra}
''')

HOOK_BUILD = textwrap.dedent('''\
    import sys
    from hatchling.builders.wheel import WheelBuilder
    print(next(WheelBuilder(sys.argv[1]).build(directory=sys.argv[2], versions=["standard"])))
''')

WORKLOAD = textwrap.dedent('''\
    import sys
    from pathlib import Path
    import numpy as np
    import onnxruntime as ort
    root = Path(__file__).resolve().parent
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    for name, width in (("mid", 1024), ("small", 256)):
        s = ort.InferenceSession(str(root / f"src/kpkg/models/{name}.onnx"), providers=["CPUExecutionProvider"])
        for _ in range(40):
            s.run(None, {"x": rng.standard_normal((4, width)).astype(np.float32)})
''')

CHECK_SCRIPT = textwrap.dedent('''\
    import sys
    from pathlib import Path
    import numpy as np
    import onnxruntime as ort
    root = Path(__file__).resolve().parent
    golden = np.load(root / "golden.npz")
    s = ort.InferenceSession(str(root / "src/cpkg/models/b.onnx"), providers=["CPUExecutionProvider"])
    err = float(np.abs(s.run(None, {"x": golden["x"]})[0] - golden["y"]).max())
    sys.exit(f"b off by {err}" if err > 0.07 else 0)
''')


def _matmuls(n: int, layers: int, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    for i in range(layers):
        src = "x" if i == 0 else f"r{i - 1}"
        nodes += [helper.make_node("MatMul", [src, f"W{i}"], [f"h{i}"]), helper.make_node("Relu", [f"h{i}"], [f"r{i}"])]
        w = (rng.standard_normal((n, n)) * 0.6 / np.sqrt(n)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
    nodes[-1] = helper.make_node("Identity", [f"h{layers - 1}"], ["y"])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@dataclass
class Fixture:
    """What every trial starts from (read-only) and how each command is set up in a trial directory."""

    base: Path

    def build(self) -> None:
        big = _matmuls(2048, 6, 1)  # 100 MB: the model of the SIGSEGV seen in CI
        wheelproj = self._project("wpkg", "")
        onnx.save(big, str(wheelproj / "src/wpkg/models/big.onnx"))
        env = {**os.environ, "HATCH_BUILD_NO_HOOKS": "true"}
        subprocess.run([sys.executable, "-c", HOOK_BUILD, str(wheelproj), str(self.base / "wheels")], env=env,
                       check=True, capture_output=True)
        hookproj = self._project("hpkg", "")
        onnx.save(_matmuls(1536, 4, 2), str(hookproj / "src/hpkg/models/m.onnx"))
        recproj = self._project("kpkg", "")
        onnx.save(_matmuls(1024, 4, 3), str(recproj / "src/kpkg/models/mid.onnx"))
        onnx.save(_matmuls(256, 2, 4), str(recproj / "src/kpkg/models/small.onnx"))
        (recproj / "use.py").write_text(WORKLOAD)
        checkproj = self._project("cpkg", 'inputs = "inputs.npz"')
        rng = np.random.default_rng(2)
        w = (rng.standard_normal((256, 128)) * 0.1).astype(np.float32)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 256])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 128])],
                                  [numpy_helper.from_array(w, "W")])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
                  str(checkproj / "src/cpkg/models/b.onnx"))
        mix = rng.standard_normal((256, 256)) * np.exp(rng.normal(0, 1, 256))
        np.savez(checkproj / "inputs.npz", x=(rng.standard_normal((16, 64, 256)) @ mix).astype(np.float32))
        x = np.random.default_rng(100).standard_normal((8, 256)).astype(np.float32)
        np.savez(checkproj / "golden.npz", x=x, y=x @ w)
        (checkproj / "check_models.py").write_text(CHECK_SCRIPT)
        (checkproj / "shrinkray-plan.json").write_bytes(OLD_PLAN)

    def _project(self, name: str, extra: str) -> Path:
        root = self.base / name
        (root / f"src/{name}/models").mkdir(parents=True)
        (root / f"src/{name}/__init__.py").write_text("")
        (root / "pyproject.toml").write_text(PYPROJECT.format(name=name, extra=extra))
        return root

    @property
    def wheel(self) -> Path:
        return next((self.base / "wheels").glob("*.whl"))


OLD_PLAN = b'{"format": "hatch-shrinkray-plan", "models": {}, "version": 1}\n'


@dataclass
class Trial:
    """One command in its own directory, TMPDIR and cache."""

    command: str
    argv: list[str]
    cwd: Path
    dirs: dict[str, Path]
    check_outputs: Callable[[Trial], list[str]]
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


def _setup(fixture: Fixture, command: str, where: Path) -> Trial:
    tmp, cache, out = where / "tmp", where / "cache", where / "out"
    tmp.mkdir(parents=True)
    dirs = {"tmp": tmp, "cache": cache, "out": out}
    if command == "shrink":
        model = fixture.base / "hpkg/src/hpkg/models/m.onnx"
        return Trial(command, [CONSOLE, "shrink", str(model), "-o", str(out)], where, dirs,
                     _shrunk_model_ok)
    if command == "wheel":
        return Trial(command, [CONSOLE, "wheel", str(fixture.wheel), "-o", str(out)], fixture.base / "wpkg", dirs,
                     _wheels_ok)
    if command == "hook":
        return Trial(command, [sys.executable, "-c", HOOK_BUILD, str(fixture.base / "hpkg"), str(out)],
                     fixture.base / "hpkg", dirs, _wheels_ok)
    if command == "record":
        project = where / "kpkg"
        shutil.copytree(fixture.base / "kpkg", project)
        dirs["project"] = project
        return Trial(command, [CONSOLE, "record", "--output", str(out), "--", sys.executable, "use.py"], project, dirs,
                     _recordings_ok)
    project = where / "cpkg"
    shutil.copytree(fixture.base / "cpkg", project)
    dirs["project"] = project
    return Trial(command, [CONSOLE, "check", "--fix", "--", sys.executable, "check_models.py"], project, dirs,
                 _plan_ok)


def _shrunk_model_ok(trial: Trial) -> list[str]:
    problems = []
    for model in trial.dirs["out"].glob("*.onnx") if trial.dirs["out"].is_dir() else ():
        try:
            onnx.checker.check_model(str(model))
        except Exception as exc:
            problems.append(f"incomplete model {model.name}: {exc}")
    return problems


def _wheels_ok(trial: Trial) -> list[str]:
    problems = []
    for wheel in trial.dirs["out"].glob("*.whl") if trial.dirs["out"].is_dir() else ():
        try:
            with zipfile.ZipFile(wheel) as zf:
                bad = zf.testzip()
                names = set(zf.namelist())
                record = next(n for n in names if n.endswith(".dist-info/RECORD"))
                listed = {line.split(",")[0] for line in zf.read(record).decode().splitlines() if line}
            if bad is not None or listed != names:
                problems.append(f"wheel {wheel.name}: bad entry {bad} or RECORD differs from the entries")
        except Exception as exc:
            problems.append(f"wheel {wheel.name} unreadable: {exc}")
    return problems


def _recordings_ok(trial: Trial) -> list[str]:
    out = trial.dirs["out"]
    problems = []
    if (out / ".parts").exists():
        problems.append(f".parts left: {sorted(p.name for p in (out / '.parts').rglob('*'))[:5]}")
    for npz in out.glob("*.npz") if out.is_dir() else ():
        try:
            with np.load(npz, allow_pickle=False) as data:
                for name in data.files:
                    data[name]
        except Exception as exc:
            problems.append(f"recording {npz.name} unreadable: {exc}")
    return problems


def _plan_ok(trial: Trial) -> list[str]:
    project = trial.dirs["project"]
    plan = project / "shrinkray-plan.json"
    problems = [f"left in the project: {p.name}" for p in project.iterdir() if p.name.startswith(".")]
    data = plan.read_bytes() if plan.exists() else b""
    if data != OLD_PLAN:
        try:
            json.loads(data)
        except ValueError:
            problems.append("the plan file is neither the old one nor valid JSON")
    return problems


def _temporaries(trial: Trial) -> list[str]:
    found = [f"TMPDIR: {p.name}" for p in trial.dirs["tmp"].iterdir() if p.name != ".ses"]
    for name, directory in trial.dirs.items():
        if name == "tmp" or not directory.exists():
            continue
        found += [f"{name}: {p.relative_to(directory)}" for p in directory.rglob("*") if p.name.endswith(".tmp")]
    cache = trial.dirs["cache"]
    if cache.is_dir():
        found += [f"cache: {p.name} without its model" for p in cache.glob("*.json")
                  if not p.with_suffix(".onnx").exists()]
    return found


def _carrying(token: str) -> list[int]:
    """Processes whose environment holds ``token`` (wherever they moved: another group, another session)."""
    pids = []
    needle = f"KILL_LOOP_TOKEN={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _expected(command: str, signum: int) -> int:
    if signum == signal.SIGTERM:
        return -signal.SIGTERM
    return 130


def _before_handlers(command: str, signum: int, code: int | None, stderr: str) -> bool:
    """Killed before the handlers exist: SIGTERM while the interpreter starts dies silently by the
    signal (nothing of ours ran yet to print a line); Ctrl-C in a hook build before hatchling loaded
    the hook is hatchling's own KeyboardInterrupt (no frame of ours in it)."""
    if signum == signal.SIGTERM:
        return code == -signal.SIGTERM and not stderr.strip()
    return command == "hook" and code == -signal.SIGINT and "hatch_shrinkray" not in stderr


@dataclass
class Outcome:
    command: str
    signum: int
    delay: float
    returncode: int | None
    killed: bool
    problems: list[str]
    orphans: int
    seconds: float


def run_trial(fixture: Fixture, command: str, where: Path, signum: int, delay: float) -> Outcome:
    trial = _setup(fixture, command, where)
    env = {**os.environ, "TMPDIR": str(trial.dirs["tmp"]), "HATCH_SHRINKRAY_CACHE_DIR": str(trial.dirs["cache"]),
           "KILL_LOOP_TOKEN": trial.token, "PYTHONUNBUFFERED": "1"}
    for name in ("HATCH_BUILD_NO_HOOKS", "HATCH_BUILD_HOOKS_ONLY", "HATCH_BUILD_CLEAN"):
        env.pop(name, None)
    start = time.monotonic()
    proc = subprocess.Popen(trial.argv, cwd=trial.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    killed = False
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signum)
        killed = True
    problems: list[str] = []
    try:
        stdout, stderr = proc.communicate(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        problems.append(f"did not stop within {STOP_WAIT:.0f} s")
        proc.kill()
        stdout, stderr = proc.communicate()
    seconds = time.monotonic() - start
    code = proc.returncode
    if killed and code == 0:
        if seconds - delay > SWALLOWED:
            problems.append(f"the signal was swallowed: exit 0 {seconds - delay:.1f} s after it; "
                            f"stderr: {stderr.strip()[-600:]!r}")
        else:
            killed = False  # the signal reached it after its work was done (while it exited)
    if killed and _before_handlers(command, signum, code, stderr):
        pass
    elif killed:
        expected = _expected(command, signum)
        if code != expected:
            problems.append(f"exit {code}, expected {expected}; stderr: {stderr.strip()[-600:]!r}")
        else:
            last = stderr.strip().splitlines()[-1:] if stderr.strip() else []
            word = ("shrinkray: " if command == "hook" else "") + (
                "terminated" if signum == signal.SIGTERM else "interrupted")
            if last != [word]:
                problems.append(f"last line {last!r}, expected {word!r}")
        if "Traceback" in stderr:
            problems.append("a traceback: " + stderr.strip()[-600:])
    elif code != 0:
        problems.append(f"unkilled run failed: exit {code}; {stderr.strip()[-600:]!r} {stdout[-200:]!r}")
    if "Exception ignored" in stderr:
        problems.append("a finalizer swallowed an exception: " + stderr.strip()[-600:])
    problems += trial.check_outputs(trial) + _temporaries(trial)
    deadline = time.monotonic() + ORPHAN_WAIT
    while (left := _carrying(trial.token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if left:
        problems.append(f"{len(left)} orphans")
    return Outcome(command, signum, delay, code, killed, problems, len(left), seconds)


COMMANDS = ("shrink", "wheel", "hook", "record", "check")


def calibrate(fixture: Fixture, root: Path) -> dict[str, float]:
    """How long each command takes when nobody stops it."""
    times = {}
    for command in COMMANDS:
        where = Path(tempfile.mkdtemp(prefix=f"cal-{command}-", dir=root))
        outcome = run_trial(fixture, command, where, signal.SIGTERM, 3600)
        shutil.rmtree(where, ignore_errors=True)
        if outcome.problems:
            raise SystemExit(f"{command} fails without a signal: {outcome.problems}")
        times[command] = outcome.seconds
        print(f"calibration: {command} {outcome.seconds:.1f} s", flush=True)
    return times


def combine(logs: list[Path], args: argparse.Namespace) -> str:
    """The report of several runs' logs (``--log``) taken together: runs in parallel, other seeds."""
    outcomes, times = [], {}
    for path in logs:
        for line in path.read_text().splitlines():
            data = json.loads(line)
            if "calibration" in data:
                times.update({k: max(v, times.get(k, 0.0)) for k, v in data["calibration"].items()})
            else:
                outcomes.append(Outcome(**data))
    return report(outcomes, times, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    parser.add_argument("--sigint-share", type=float, default=0.3)
    parser.add_argument("--work", type=Path, default=None, help="where trials run (default: a temporary directory)")
    parser.add_argument("--report", type=Path, default=None, help="write the figures here (Markdown)")
    parser.add_argument("--log", type=Path, default=None, help="one JSON line per trial")
    parser.add_argument("--combine", type=Path, nargs="+", default=None, metavar="LOG",
                        help="no trials: the report of these logs taken together")
    args = parser.parse_args()
    if args.combine:
        text = combine(args.combine, args)
        print(text)
        if args.report:
            args.report.write_text(text)
        return
    # A shell starts a background job with SIGINT ignored, and children inherit that: Python would then
    # install no KeyboardInterrupt handler in the commands, and Ctrl-C would be dropped by design.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kill-loop-", dir=args.work))
    try:
        fixture = Fixture(root / "fixture")
        fixture.base.mkdir()
        fixture.build()
        times = calibrate(fixture, root)
        outcomes: list[Outcome] = []
        log = args.log.open("w") if args.log else None
        if log:
            log.write(json.dumps({"calibration": times}) + "\n")
        while sum(o.killed for o in outcomes) < args.kills:
            command = rng.choice(args.commands)
            signum = signal.SIGINT if rng.random() < args.sigint_share else signal.SIGTERM
            delay = rng.uniform(0, 1.05 * times[command])
            where = Path(tempfile.mkdtemp(prefix=f"t{len(outcomes)}-", dir=root))
            outcome = run_trial(fixture, command, where, signum, delay)
            shutil.rmtree(where, ignore_errors=True)
            outcomes.append(outcome)
            if log:
                log.write(json.dumps(outcome.__dict__) + "\n")
                log.flush()
            mark = "ok" if not outcome.problems else "PROBLEM " + "; ".join(outcome.problems)
            print(f"{len(outcomes):4d} {command:6s} {signal.Signals(signum).name:7s} at {delay:6.2f} s -> "
                  f"{outcome.returncode} ({'killed' if outcome.killed else 'finished'}): {mark}", flush=True)
        text = report(outcomes, times, args)
        print(text)
        if args.report:
            args.report.write_text(text)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(outcomes: list[Outcome], times: dict[str, float], args: argparse.Namespace) -> str:
    killed = [o for o in outcomes if o.killed]
    crashes = [o for o in killed if o.returncode is not None and o.returncode < 0
               and o.returncode != -o.signum]
    half = [o for o in outcomes if any(p.startswith(("TMPDIR", "out", "cache", "project", "incomplete", "wheel",
                                                        "recording", "the plan", "left in", ".parts"))
                                       for p in o.problems)]
    orphans = sum(o.orphans for o in outcomes)
    swallowed = sum(any(p.startswith("the signal was swallowed") for p in o.problems) for o in outcomes)
    hung = sum(any(p.startswith("did not stop") for p in o.problems) for o in outcomes)
    troubled = [o for o in outcomes if o.problems]
    ran = (f"python -m benchmarks.kill_loop --combine {' '.join(str(p) for p in args.combine)}" if args.combine
               else f"python -m benchmarks.kill_loop --kills {args.kills} --seed {args.seed} "
                    f"--sigint-share {args.sigint_share}")
    lines = [f"Command: `{ran}`", "",
             "| command | unstopped run (s) | kills (SIGTERM / SIGINT) | finished first | with a problem |",
             "|---|---|---|---|---|"]
    for command in args.commands:
        mine = [o for o in outcomes if o.command == command]
        k = [o for o in mine if o.killed]
        terms = sum(o.signum == signal.SIGTERM for o in k)
        lines.append(f"| {command} | {times.get(command, float('nan')):.1f} | {len(k)} ({terms} / {len(k) - terms}) | "
                     f"{len(mine) - len(k)} | {sum(bool(o.problems) for o in mine)} |")
    exits = Counter((o.command, o.returncode) for o in killed)
    lines += ["", f"Kills: {len(killed)}; crashes by another signal: {len(crashes)}; runs with a half-written file: "
              f"{len(half)}; orphans: {orphans}; signals swallowed (exit 0 long after): {swallowed}; runs that did not "
              f"stop within {STOP_WAIT:.0f} s: {hung}; runs with any problem: {len(troubled)}.",
              "", "Exit codes of the killed runs: " + ", ".join(f"{c} {r}: {n}" for (c, r), n in sorted(
                  exits.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)))]
    problems = [o for o in outcomes if o.problems]
    if problems:
        lines += ["", "Problems:", ""]
        lines += [f"- {o.command} {signal.Signals(o.signum).name} at {o.delay:.2f} s: {'; '.join(o.problems)[:400]}"
                  for o in problems[:40]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
