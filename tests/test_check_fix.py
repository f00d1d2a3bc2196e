"""``hatch-shrinkray check --fix``: where the package's tests regress with the shrunk models, check
itself finds per model the cheapest choice that restores them, writes it into the plan file, and
every later build ships it and says so. Run as a user runs it (the console script, a throw-away
project, the command in a subprocess).

The project has three small models that a recording fits (output-aware int8 codes, kept by the
do-no-harm guard). Its test holds ``b`` to a tolerance on inputs unlike the recording's, which the
fitted codes miss by about three times and round-to-nearest keeps; ``a`` and ``c`` are held loosely.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import CONSOLE_SCRIPT, COUNTS_ITS_RUNS, build, cli, runs, write_project
from onnx import helper

from hatch_shrinkray.codec import encode
from hatch_shrinkray.shipping.manifest import file_sha256
from hatch_shrinkray.shipping.plan import PLAN_NAME, read_plan

from onnx_builders import init, model, run, save, vi

MODELS = "src/pkg/models"
K, N = 256, 128
SCRIPT = COUNTS_ITS_RUNS + textwrap.dedent('''\
    golden = np.load(ROOT / "tests/golden.npz")
    off = []
    for name, tol in (("a", TOL_A), ("b", TOL_B), ("c", 0.5)):
        if name not in golden:
            continue
        s = ort.InferenceSession(str(ROOT / f"src/pkg/models/{name}.onnx"), providers=["CPUExecutionProvider"])
        err = float(np.abs(s.run(None, {"x": golden["x"]})[0] - golden[name]).max())
        if err > tol:
            off.append(f"{name} off by {err}")
    sys.exit("; ".join(off) if off else 0)
''')
TESTS = textwrap.dedent('''
    from pathlib import Path

    import numpy as np
    import onnxruntime as ort

    ROOT = Path(__file__).resolve().parents[1]
    GOLDEN = np.load(ROOT / "tests/golden.npz")
    with open(ROOT / "runs.log", "a") as fh:
        fh.write("run\\n")


    def error(name):
        s = ort.InferenceSession(str(ROOT / f"src/pkg/models/{name}.onnx"), providers=["CPUExecutionProvider"])
        return float(np.abs(s.run(None, {"x": GOLDEN["x"]})[0] - GOLDEN[name]).max())


    def test_a():
        assert error("a") < 0.5


    def test_b():
        assert error("b") < 0.07


    def test_c():
        assert error("c") < 0.5


    def test_broken_anyway():
        assert False, "fails with the original models too"


    def test_flaky():
        runs = len((ROOT / "runs.log").read_text().splitlines())
        assert runs != 2, "fails on the second run only, whatever the models"
''')
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
SCRIPT_COMMAND = [sys.executable, "check_models.py"]


def make_project(root: Path, *, tol_b: float = 0.07, tol_a: float = 0.5, unloaded: bool = False,
                 names: str = "abc") -> Path:
    """Three models (``names``) the script and the tests load (and, with ``unloaded``, a fourth they
    never do)."""
    write_project(root, 'inputs = "inputs.npz"\n', models_glob="src/pkg/models/*.onnx", package="pkg",
                  wheel_table='exclude = ["*.log"]\n')
    (root / "tests").mkdir()
    for name in names + ("d" if unloaded else ""):
        w = (np.random.default_rng(10 + "abcd".index(name)).standard_normal((K, N)) * 0.1).astype(np.float32)
        save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", K])], [vi("y", ["batch", N])],
                   [init("W", w)]), root / MODELS / f"{name}.onnx")
    rng = np.random.default_rng(2)
    mix = rng.standard_normal((K, K)) * np.exp(rng.normal(0, 1, K))  # a recording unlike the tests' inputs
    np.savez(root / "inputs.npz", x=(rng.standard_normal((16, 64, K)) @ mix).astype(np.float32))
    x = np.random.default_rng(100).standard_normal((8, K)).astype(np.float32)
    np.savez(root / "tests/golden.npz", x=x, **{n: run(root / MODELS / f"{n}.onnx", {"x": x})[0] for n in names})
    (root / "check_models.py").write_text(SCRIPT.replace("TOL_B", repr(tol_b)).replace("TOL_A", repr(tol_a)))
    (root / "tests/test_models.py").write_text(TESTS)
    return root


pytestmark = pytest.mark.usefixtures("private_cache")


NO_PYTEST = textwrap.dedent('''
    import importlib.abc, sys

    class NoPytest(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in ("pytest", "_pytest"):
                raise ImportError(f"{name} is not installed here")
            return None

    sys.meta_path.insert(0, NoPytest())
    from hatch_shrinkray.cli import main
    code = main(sys.argv[1:])
    sys.exit(99 if "pytest" in sys.modules or "_pytest" in sys.modules else code)
''')


def without_pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``hatch-shrinkray ARGS`` in an interpreter that cannot import pytest (the command it runs can)."""
    return subprocess.run([sys.executable, "-c", NO_PYTEST, *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=300)


def test_fix_blames_one_model_of_three_by_bisection_and_the_build_ships_its_remedy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_project(tmp_path / "proj", unloaded=True)
    plain = without_pytest("check", "--", *SCRIPT_COMMAND, cwd=root)  # as the [engine] install has none
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "REGRESSED exit status" in plain.stdout
    totals = [line for line in plain.stderr.splitlines() if line.startswith("shrinkray: total ")]
    assert len(totals) == 1 and totals[0].startswith("shrinkray: total 4 models: "), plain.stderr  # not one a model
    assert "not loaded: the command never created a session of src/pkg/models/d.onnx: it judged nothing there" \
        in plain.stdout
    (fix,) = [line for line in plain.stdout.splitlines() if line.startswith("fix: ")]
    assert fix == f"fix: hatch-shrinkray check --fix -- {sys.executable} check_models.py", fix
    (root / "runs.log").unlink()

    fixed = cli("check", "--fix", "--json", "report.json", "--", *SCRIPT_COMMAND, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # check's own two runs, the shrunk run again (flaky?), two bisection runs, b round-to-nearest
    assert runs(root) == 2 + 4, fixed.stderr
    assert "check --fix: 4 run(s) of the command beyond check's own two" in fixed.stdout
    out = fixed.stdout.splitlines()
    assert "chose: src/pkg/models/a.onnx: int8 as configured (nothing regressed with it)" in out
    assert "chose: src/pkg/models/c.onnx: int8 as configured (nothing regressed with it)" in out
    (b,) = [line for line in out if line.startswith("chose: src/pkg/models/b.onnx")]
    assert b.startswith("chose: src/pkg/models/b.onnx: int8 round-to-nearest, ") and b.endswith(
        ": the command's exit status regressed with the fitted codes"), b
    assert out[-1] == "verdict: nothing regressed with every choice applied (final run: no pytest tests seen, exit 0)"
    assert [line for line in out if line.startswith("verdict: ")] == out[-1:]  # one verdict, the last line
    assert "before --fix: 1 regressed with the shrunk models:" in out
    report = json.loads((root / "report.json").read_text())
    assert report["passed"] and report["runs_beyond_check"] == 4 and report["never_loaded"] == [f"{MODELS}/d.onnx"]

    plan = read_plan(root / PLAN_NAME)
    (sha, entry), = plan.items()
    assert sha == file_sha256(root / MODELS / "b.onnx") and entry.model == f"{MODELS}/b.onnx"
    assert entry.remedy is not None and encode(entry.remedy) == {"rounding": "nearest"}
    text = (root / PLAN_NAME).read_text()
    assert str(tmp_path) not in text and '"version": 2' in text
    assert entry.checked["command"] == "python check_models.py"  # as the user would type it again

    # The plan is what every later build ships, and the build says why.
    (root / "runs.log").unlink()
    with zipfile.ZipFile(build(root)) as zf:
        shipped = zf.read("pkg/models/b.onnx")
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("shrinkray: src/pkg/models/b.onnx: shipped shrunk, ")]
    assert ", int8 round-to-nearest, check --fix's choice: 1 test regressed with cheaper choices; " not in line
    assert ", int8 round-to-nearest, check --fix's choice: " in line, line
    assert line.endswith(", cached"), line  # check --fix shrank it; the build copies it out of the cache
    assert "src/pkg/models/b.onnx: this is the model `check` accepted" in err
    assert hashlib.sha256(shipped).hexdigest() == entry.checked["shrunk_sha256"]

    again = cli("check", "--", *SCRIPT_COMMAND, cwd=root)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "b.onnx: int8 round-to-nearest, 131.18 -> 33.48 KB (25.5%);" in again.stdout


def test_an_exact_test_gets_the_original_and_shrink_plan_ships_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """No encoding keeps b's answers exactly: the ladder ends at the original, which the build ships."""
    root = make_project(tmp_path / "proj", tol_b=0.0, names="b")
    fixed = without_pytest("check", "--fix", "--", *SCRIPT_COMMAND, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    lines = fixed.stdout.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("chose: src/pkg/models/b.onnx")]
    assert lines[at:at + 2] == [  # the reason on a line of its own: the whole would not fit 160 characters
        "chose: src/pkg/models/b.onnx: the original (131.18 KB)",
        "       why: the command's exit status regressed with the fitted codes; int8 round-to-nearest, fp16 did not "
        "restore it"], lines[at:at + 2]
    # check's two, the shrunk run again, round-to-nearest, fp16 (the per-tensor plan is not tried without
    # --max-runs); the original needs no run (run 1 was it)
    assert runs(root) == 2 + 3, fixed.stderr
    (entry,) = read_plan(root / PLAN_NAME).values()
    assert entry.ships_original and "shrunk_sha256" not in entry.checked

    # The same project checked from another directory writes the very same bytes.
    other = make_project(tmp_path / "elsewhere" / "copy", tol_b=0.0, names="b")
    assert cli("check", "--fix", "--", *SCRIPT_COMMAND, cwd=other).returncode == 0
    assert (other / PLAN_NAME).read_bytes() == (root / PLAN_NAME).read_bytes()

    with zipfile.ZipFile(build(root)) as zf:
        shipped = zf.read("pkg/models/b.onnx")
    assert shipped == (root / MODELS / "b.onnx").read_bytes()
    assert ("shrinkray: src/pkg/models/b.onnx: shipped its original (131.18 KB), check --fix's choice: 1 test "
            "regressed with cheaper choices") in capsys.readouterr().err

    out = tmp_path / "out"
    done = cli("shrink", str(root / MODELS / "b.onnx"), "--plan", str(root / PLAN_NAME), "-o", str(out), cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "b.onnx").read_bytes() == (root / MODELS / "b.onnx").read_bytes()
    assert "b.onnx: original written (131.18 KB), check --fix's choice: 1 test regressed with " in done.stderr


@pytest.mark.extended
def test_pytest_outcomes_come_from_the_commands_interpreter_and_flaky_or_broken_tests_are_never_blamed(
        tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    (root / "runs.log").write_text("")
    # check in a process that cannot import pytest (as with the [engine] install): the command's own
    # pytest reports the outcomes
    plain = without_pytest("check", "--", *PYTEST, cwd=root)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "REGRESSED tests/test_models.py::test_b: passed with the originals, failed" in plain.stdout
    assert "fail with the original models too, never blamed on a model: tests/test_models.py::test_broken_anyway" \
        in plain.stdout

    (root / "runs.log").write_text("")
    fixed = cli("check", "--fix", "--", *PYTEST, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    out = fixed.stdout
    assert "FLAKY tests/test_models.py::test_flaky: passed once and failed once with the same shrunk models; not " \
           "blamed on a model" in out
    assert "REGRESSED tests/test_models.py::test_flaky" not in out
    (b,) = [line for line in out.splitlines() if line.startswith("chose: src/pkg/models/b.onnx")]
    assert b.endswith(": tests/test_models.py::test_b regressed with the fitted codes"), b
    assert "test_broken_anyway" not in b and "test_flaky" not in b
    assert out.splitlines()[-1] == ("verdict: nothing regressed with every choice applied (final run: 4 passed, "
                                    "1 failed, exit 1); flaky, not counted: tests/test_models.py::test_flaky")
    (entry,) = read_plan(root / PLAN_NAME).values()
    assert entry.checked["regressed"] == ["tests/test_models.py::test_b"]
    assert runs(root) == 2 + 4


def test_ctrl_c_during_fix_leaves_the_old_plan(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj", names="b")
    old = b'{"format": "hatch-shrinkray-plan", "models": {}, "version": 1}\n'
    (root / PLAN_NAME).write_bytes(old)
    script = root / "check_models.py"
    script.write_text(script.read_text().replace(
        'golden = np.load', 'if len((ROOT / "runs.log").read_text().splitlines()) >= 3:\n'
        '    (ROOT / "started").touch()\n    import time; time.sleep(900)\ngolden = np.load'))
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "check", "--fix", "--", *SCRIPT_COMMAND], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (root / "started").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (root / "started").exists(), proc.communicate()
    proc.send_signal(signal.SIGINT)
    # The command sleeps far longer than this wait: a check that waited for it would fail here, while
    # a loaded machine gets time to stop the command's group (SIGTERM, a grace period, SIGKILL).
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130, stdout + stderr
    assert stderr.splitlines()[-1] == "interrupted"
    assert (root / PLAN_NAME).read_bytes() == old
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj", names="b")
    failing = cli("check", "--fix", "--", sys.executable, "-c", "import sys; sys.exit(3)", cwd=root)
    assert failing.returncode == 1
    assert failing.stderr.splitlines()[-1].startswith(
        f"error: `{sys.executable} -c 'import sys; sys.exit(3)'` failed with the original models (exit 3), so no "
        "failure with the shrunk ones can be blamed on them"), failing.stderr
    assert "Traceback" not in failing.stderr and not (root / PLAN_NAME).exists()

    (root / PLAN_NAME).write_text("{not json")
    unreadable = cli("check", "--fix", "--", *SCRIPT_COMMAND, cwd=root)
    assert unreadable.returncode == 1 and unreadable.stderr.count("error") == 1, unreadable.stderr
    assert PLAN_NAME in unreadable.stderr and f"{PLAN_NAME}: not valid JSON" in unreadable.stderr
    assert "delete the file and run check --fix again" in unreadable.stderr

    elsewhere = make_project(tmp_path / "other", names="b")
    theirs = {"format": "hatch-shrinkray-plan", "version": 2, "models": {hashlib.sha256(b"x").hexdigest(): {
        "model": "src/other/model.onnx", "method": "int8", "tensors": [], "checked": {},
        "remedy": {"rounding": "nearest"}}}}
    (elsewhere / PLAN_NAME).write_text(json.dumps(theirs))
    foreign = cli("check", "--fix", "--", *SCRIPT_COMMAND, cwd=elsewhere)
    assert foreign.returncode == 1 and len(foreign.stderr.strip().splitlines()) == 1, foreign.stderr
    assert foreign.stderr.startswith(f"error: {elsewhere / PLAN_NAME}: "), foreign.stderr
    assert "holds choices only for models this project does not configure (src/other/model.onnx)" in foreign.stderr
    assert os.path.getsize(elsewhere / PLAN_NAME) == len(json.dumps(theirs))


def assert_a_and_b_round_to_nearest(stdout: str) -> None:
    """``--fix`` chose round-to-nearest for a and b and left c as configured."""
    chose = [line.split(",")[0] for line in stdout.splitlines() if line.startswith("chose: ")]
    assert chose == ["chose: src/pkg/models/a.onnx: int8 round-to-nearest",
                     "chose: src/pkg/models/b.onnx: int8 round-to-nearest",
                     "chose: src/pkg/models/c.onnx: int8 as configured (nothing regressed with it)"], chose


@pytest.mark.extended
def test_two_models_to_blame_each_get_their_remedy(tmp_path: Path) -> None:
    """a and b both regress with their fitted codes: the first one blamed climbs again with the
    others original once even its original does not restore the test, then b is found among the
    rest."""
    root = make_project(tmp_path / "proj", tol_a=0.07)
    fixed = cli("check", "--fix", "--", *SCRIPT_COMMAND, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert_a_and_b_round_to_nearest(fixed.stdout)
    assert sorted(e.model for e in read_plan(root / PLAN_NAME).values()) == [f"{MODELS}/a.onnx", f"{MODELS}/b.onnx"]
    assert fixed.stdout.splitlines()[-1].startswith("verdict: nothing regressed with every choice applied")


@pytest.mark.extended
def test_a_rung_that_restores_its_own_tests_is_taken_without_a_run_to_confirm_it(tmp_path: Path) -> None:
    """a's and b's own tests regress: a's first rung, run with b still shrunk, passes a's test and fails
    only b's, which regressed with every model shrunk already. That run is the one b's bisection starts
    from; a run with b original to confirm a's rung would tell nothing new."""
    root = make_project(tmp_path / "proj", tol_a=0.07)
    tests = root / "tests/test_models.py"
    tests.write_text(tests.read_text().replace('error("a") < 0.5', 'error("a") < 0.07'))
    (root / "runs.log").write_text("")
    fixed = cli("check", "--fix", "--", *PYTEST, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert_a_and_b_round_to_nearest(fixed.stdout)
    assert "the models not blamed original" not in fixed.stderr
    # the flaky re-run; bisection a+b, then a; a's rung (b still shrunk); bisection b; b's rung, the final run
    assert runs(root) == 2 + 6, fixed.stderr
    assert fixed.stdout.splitlines()[-1].startswith("verdict: nothing regressed with every choice applied")


@pytest.mark.extended
def test_fix_on_an_installed_packages_models_writes_their_paths_inside_the_wheel(tmp_path: Path) -> None:
    """The wheel path: MODEL files in a ``site-packages`` outside the project get the project's table
    (its ``inputs``), and the plan names them as ``hatch-shrinkray wheel`` finds them."""
    root = make_project(tmp_path / "proj")
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(root / "src" / "pkg", site / "pkg")
    script = root / "check_models.py"
    script.write_text(script.read_text().replace('ROOT / f"src/pkg/models/{name}.onnx"',
                                                 f'{str(site)!r} + f"/pkg/models/{{name}}.onnx"'))
    (root / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0.1.0"\n\n[tool.hatch-shrinkray]\n'
                                         'models = ["pkg/models/*.onnx"]\ninputs = "inputs.npz"\n')
    models = [os.path.relpath(p, root) for p in sorted((site / "pkg" / "models").glob("*.onnx"))]
    assert models[0].startswith("../env/")
    fixed = cli("check", "--fix", *models, "--", *SCRIPT_COMMAND, cwd=root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "chose: pkg/models/b.onnx: int8 round-to-nearest, " in fixed.stdout
    (entry,) = read_plan(root / PLAN_NAME).values()
    assert entry.model == "pkg/models/b.onnx" and entry.remedy is not None
    assert str(tmp_path) not in (root / PLAN_NAME).read_text()
