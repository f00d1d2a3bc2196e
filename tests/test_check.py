"""``hatch-shrinkray check``: the package's own tests judge the shrunk model, run as a user runs it
(the console script, a real project, a real pytest run in a subprocess).

The project's model has one weight column with an outlier (like Silero VAD's 54.9 among values
around 0.04): round-to-nearest int8 zeroes the rest of that column, and the project's exact-label
test catches it, while the tolerance verification on generated inputs does not."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hardening import PY, build, cli, files_under, one_error, write_project
from onnx import helper

from hatch_shrinkray.shipping.manifest import file_sha256
from hatch_shrinkray.shipping.plan import PLAN_NAME, read_plan

from onnx_builders import init, mlp, model, run, save, vi

MODEL = "src/pkg/models/net.onnx"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

TESTS = textwrap.dedent('''
    from pathlib import Path

    import numpy as np
    import onnxruntime as ort

    ROOT = Path(__file__).resolve().parents[1]
    GOLDEN = np.load(ROOT / "tests/golden.npz")


    def session():
        return ort.InferenceSession(str(ROOT / "src/pkg/models/net.onnx"), providers=["CPUExecutionProvider"])


    def test_shape():
        assert session().run(None, {"x": GOLDEN["x"][:3]})[0].shape == (3, 6)


    def test_labels_exactly():
        labels = session().run(None, {"x": GOLDEN["x"]})[0].argmax(axis=1)
        np.testing.assert_array_equal(labels, GOLDEN["labels"])


    def test_one_row_at_a_time():
        for row in GOLDEN["x"][:4]:
            assert session().run(None, {"x": row[None]})[0].shape == (1, 6)
''')


def _net() -> object:
    r = np.random.default_rng(7)
    w1 = (r.standard_normal((128, 256)) * 0.04).astype(np.float32)
    w1[5, 17] = 50.0  # the outlier: int8's step for column 17 becomes 0.4
    w1[:, 17] *= 3.0
    w2 = (r.standard_normal((256, 256)) * 0.06).astype(np.float32)
    w2[17, :] *= 10.0  # and column 17 matters
    w3 = (r.standard_normal((256, 6)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "W2"], ["h2"]), helper.make_node("Relu", ["h2"], ["r2"]),
             helper.make_node("MatMul", ["r2", "W3"], ["y"])]
    return model(nodes, [vi("x", ["batch", 128])], [vi("y", ["batch", 6])],
                 [init("W1", w1), init("W2", w2), init("W3", w3)])


@pytest.fixture
def project(tmp_path: Path, private_cache: Path) -> Path:
    root = write_project(tmp_path / "proj", '\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
                         models_glob="src/pkg/models/*.onnx", package="pkg")
    (root / "tests").mkdir()
    path = save(_net(), root / MODEL)  # type: ignore[arg-type]
    x = np.random.default_rng(1).standard_normal((400, 128)).astype(np.float32)
    x[:, 5] = np.abs(x[:, 5]) * 0.02
    y = run(path, {"x": x})[0]
    top2 = np.sort(y, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 0.05 * (y.max(1) - y.min(1))  # no near-ties in the golden labels
    np.savez(root / "tests/golden.npz", x=x[clear], labels=y[clear].argmax(1))
    (root / "tests/test_model.py").write_text(TESTS)
    return root


def current_umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


@pytest.mark.extended
def test_check_names_the_regression_then_the_plan_fixes_it(project: Path) -> None:
    before = cli("check", "--json", "-", "--", *PYTEST, cwd=project)
    assert before.returncode == 1, before.stdout + before.stderr
    assert "REGRESSED tests/test_model.py::test_labels_exactly: passed with the originals, failed" in before.stdout
    assert "Mismatched elements" in before.stdout  # the failure text, as pytest wrote it
    assert "passes its limits on 8 generated samples" in before.stdout  # what it did not catch
    lines = before.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("hint: src/pkg/models/net.onnx"))
    hint = "\n".join(lines[at:at + 3])  # the weights, then a line per remedy
    # the project's table configures the model: the fix is a config line there, as docs/checking.md says
    assert "W1 (rel-L2" in hint and '`exclude-tensors = ["W1"]`' in hint and '`encodings = {W1 = "fp16"}`' in hint, hint
    report = json.loads(before.stdout[before.stdout.index("\n{") + 1:])
    assert [r["test"] for r in report["regressions"]] == ["tests/test_model.py::test_labels_exactly"]
    assert report["runs"]["original"]["tests"] == {f"tests/test_model.py::test_{n}": "passed"
                                                   for n in ("labels_exactly", "one_row_at_a_time", "shape")}
    sha = file_sha256(project / MODEL)
    assert report["runs"]["shrunk"]["models"][sha]["swapped"] == 6  # every session of the model, swapped

    # The tests' own feeds are too few independent units to trust a plan fitted to them.
    weak = cli("check", "--search", "--", *PYTEST, cwd=project)
    assert weak.returncode == 1, weak.stdout + weak.stderr
    assert weak.stdout.splitlines()[-1].startswith("verdict: FAILS, exit 1: src/pkg/models/net.onnx: the plan found "
                                                   "was not kept"), weak.stdout
    assert "with int8 and W1 fp16" in weak.stdout
    assert "the plan is not written: the searched run's own feeds (the plan was fitted to them) hold" \
        in weak.stdout and not (project / PLAN_NAME).exists()

    # With a recording of other inputs the plan is judged there against round-to-nearest int8, and kept.
    x = np.random.default_rng(11).standard_normal((32, 4, 128)).astype(np.float32)
    x[..., 5] = np.abs(x[..., 5]) * 0.02
    np.savez(project / "tests/held_out.npz", x=x)
    text = (project / "pyproject.toml").read_text().replace(
        'models = ["src/pkg/models/*.onnx"]', 'models = ["src/pkg/models/*.onnx"]\ninputs = "tests/held_out.npz"')
    (project / "pyproject.toml").write_text(text)
    search = cli("check", "--search", "--", *PYTEST, cwd=project)
    assert search.returncode == 0, search.stdout + search.stderr
    assert "with int8 and W1 fp16" in search.stdout, search.stdout
    assert "the plan kept: on 32 held-out units (the recording " in search.stdout
    plan = read_plan(project / PLAN_NAME)
    assert (project / PLAN_NAME).stat().st_mode & 0o777 == 0o666 & ~current_umask()  # a file to commit, not private
    assert "verdict: ok" in search.stdout.splitlines()[-1]
    entry = plan[sha]
    assert entry.model == MODEL and entry.method == "int8" and entry.tensors == (("main", "W1", "fp16"),)
    assert entry.checked["shadow_flips"] == 0 and entry.checked["shadow_decisions"] > 300
    assert "run 1: int8 as configured" in search.stderr and "-> fails" in search.stderr

    after = cli("check", "--", *PYTEST, cwd=project)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "REGRESSED" not in after.stdout and "nothing regressed" in after.stdout
    assert "int8 + plan (1 tensors)" in after.stdout

    # Every later build ships that plan without running any test: the very bytes check accepted.
    with zipfile.ZipFile(build(project)) as zf:
        shipped = zf.read("pkg/models/net.onnx")
    assert hashlib.sha256(shipped).hexdigest() == entry.checked["shrunk_sha256"]


def test_shadow_counts_flips_over_every_call(project: Path) -> None:
    proc = cli("check", "--shadow", "--json", "-", "--", *PYTEST, cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # flips beyond --max-flip-rate 0
    (verdict,) = [line for line in proc.stdout.splitlines() if line.startswith("verdict:")]
    assert verdict.startswith("verdict: FAILS the answer gate (--max-flip-rate 0, the default: no answer may "
                              "change), exit 1: src/pkg/models/net.onnx: "), verdict
    assert " labels changed, more than --max-flip-rate 0 allows" in verdict, verdict
    assert "3 passed" in proc.stdout  # the program got the original's answers: its tests pass
    data = json.loads(proc.stdout[proc.stdout.index("\n{") + 1:])
    (m,) = data["models"]
    out = m["outputs"]["y"]
    rows = len(np.load(project / "tests/golden.npz")["labels"])
    assert m["calls"] == out["calls"] == 6 and m["errors"] == 0 and m["sessions"] == m["shadowed"] == 6
    assert out["kind"] == "top-1" and out["positions"] == 3 + rows + 4
    assert out["flips"] > 20 and out["worst_rel_l2"] > out["mean_rel_l2"] > 0
    assert "flipped" in proc.stdout and "(top-1)" in proc.stdout
    loose = cli("check", "--shadow", "--max-flip-rate", "0.5", "--", *PYTEST, cwd=project)
    assert loose.returncode == 0, loose.stdout + loose.stderr


def test_check_without_the_model_or_the_command_is_one_line(project: Path) -> None:
    none = cli("check", "--", sys.executable, "-c", "print('no model here')", cwd=project)
    assert none.returncode == 1
    assert "created no onnxruntime session of a configured model" in none.stderr
    assert "Traceback" not in none.stderr
    empty = cli("check", cwd=project)
    assert empty.returncode == 1 and empty.stderr.startswith("error: no command to check with")
    missing = cli("check", str(project / "nope.onnx"), "--", *PYTEST, cwd=project)
    assert missing.returncode == 1 and "pattern `nope.onnx` matches no file" in missing.stderr


EXACT = textwrap.dedent('''
    from pathlib import Path

    import numpy as np
    import onnxruntime as ort

    ROOT = Path(__file__).resolve().parents[1]


    def test_outputs_exactly():
        golden = np.load(ROOT / "tests/golden.npz")
        got = ort.InferenceSession(str(ROOT / "src/pkg/models/net.onnx"),
                                   providers=["CPUExecutionProvider"]).run(None, {"x": golden["x"]})[0]
        np.testing.assert_array_equal(got, golden["y"])
''')


def test_a_regression_under_fitted_codes_names_the_fix_command(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 fitted to a recording (output-aware rounding, kept by the guard) and a test that any
    rounding fails: check names the one command that fixes it, with the user's own command; with
    ``rounding = "nearest"`` set, the model ships round-to-nearest and the test still regresses."""
    k, n = 256, 128
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    root = tmp_path / "proj"
    (root / "src/pkg/models").mkdir(parents=True)
    (root / "tests").mkdir()
    path = save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", ["batch", k])],
                      [vi("y", ["batch", n])], [init("W", w)]), root / MODEL)
    mix = rng.standard_normal((k, k)) * np.exp(rng.normal(0, 1, k))
    np.savez(root / "inputs.npz", x=(rng.standard_normal((16, 64, k)) @ mix).astype(np.float32))
    x = rng.standard_normal((8, k)).astype(np.float32)
    np.savez(root / "tests/golden.npz", x=x, y=run(path, {"x": x})[0])
    (root / "tests/test_model.py").write_text(EXACT)
    table = '[tool.hatch.build.hooks.shrinkray]\nmodels = ["src/pkg/models/*.onnx"]\ninputs = "inputs.npz"\n'
    (root / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0.1.0"\n\n' + table)
    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    fitted = cli("check", "--", *PYTEST, cwd=root)
    assert fitted.returncode == 1, fitted.stdout + fitted.stderr
    assert "REGRESSED tests/test_model.py::test_outputs_exactly" in fitted.stdout
    fix = (f"fix: hatch-shrinkray check --fix -- {shlex.join(PYTEST)}\n"
           "     (finds per model the cheapest choice that passes these tests again, for the build to ship)")
    assert fix in fitted.stdout, fitted.stdout
    (root / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0.1.0"\n\n' + table
                                         + '\n[[tool.hatch.build.hooks.shrinkray.overrides]]\n'
                                           f'models = ["{MODEL}"]\nrounding = "nearest"\n')
    nearest = cli("check", "--", *PYTEST, cwd=root)
    assert nearest.returncode == 1, nearest.stdout + nearest.stderr  # any rounding fails an exact test
    assert "REGRESSED tests/test_model.py::test_outputs_exactly" in nearest.stdout
    assert "net.onnx: int8 round-to-nearest, " in nearest.stdout and fix in nearest.stdout, nearest.stdout


def test_an_installed_packages_models_get_the_projects_table(project: Path) -> None:
    """The wheel path: the table's globs are in-wheel paths, the models live in an installed package
    (a ``site-packages`` outside the project). Named as files there, they get the table's options,
    matched by their in-wheel path (its ``inputs``, its ``judges``, which the shadow honours too),
    not the flags alone."""
    site = project.parent / "env" / "lib" / "python3.11" / "site-packages"
    (site / "pkg" / "models").mkdir(parents=True)
    installed = site / "pkg" / "models" / "net.onnx"
    installed.write_bytes((project / MODEL).read_bytes())
    np.savez(project / "inputs.npz", x=np.random.default_rng(3).standard_normal((16, 4, 128)).astype(np.float32))
    script = project / "use.py"
    script.write_text(textwrap.dedent(f'''
        import numpy as np
        import onnxruntime as ort
        s = ort.InferenceSession({str(installed)!r}, providers=["CPUExecutionProvider"])
        for seed in range(3):
            s.run(None, {{"x": np.random.default_rng(seed).standard_normal((5, 128)).astype(np.float32)}})
    '''))
    table = ('[project]\nname = "pkg"\nversion = "0.1.0"\n\n[tool.hatch-shrinkray]\nmodels = ["pkg/models/*.onnx"]\n'
             'inputs = "inputs.npz"\nmax-rel-l2 = 1\nmin-cosine = 0\nmin-agreement = 0\n')
    (project / "pyproject.toml").write_text(table)
    judged = cli("check", "--shadow", "--max-flip-rate", "1", str(installed), "--", sys.executable, str(script),
                 cwd=project)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert "pkg/models/net.onnx" in judged.stdout and "on 16 recorded samples" in judged.stderr + judged.stdout
    assert "15 (top-1)" in judged.stdout  # 3 calls of 5 rows, each row's label a decision
    (project / "pyproject.toml").write_text(table + 'judges = { "y" = "off" }\n')
    unjudged = cli("check", "--shadow", str(installed), "--", sys.executable, str(script), cwd=project)
    assert unjudged.returncode == 0, unjudged.stdout + unjudged.stderr
    assert "no answers judged over 3 calls" in unjudged.stdout and "(top-1)" not in unjudged.stdout
    assert "verdict: nothing gated: no output had decisions to compare" in unjudged.stdout  # never "ok"
    assert "verdict: ok" in judged.stdout and "closed loop" not in judged.stdout  # no recurrent model here


def test_a_package_that_pins_its_models_digest_is_named(project: Path) -> None:
    """The package checks the model file against a sha256 it ships before loading it: swapping
    sessions passes that check (the file is the original), so the report says in one line that the
    package would reject the shipped model, and which key makes the build rewrite the pin."""
    digest = hashlib.sha256((project / MODEL).read_bytes()).hexdigest()
    (project / "src/pkg/checksums.json").write_text(json.dumps({"models/net.onnx": digest}))
    script = project / "use.py"
    script.write_text(textwrap.dedent('''
        import hashlib, json, pathlib
        import numpy as np
        import onnxruntime as ort
        pkg = pathlib.Path("src/pkg")
        expected = json.loads((pkg / "checksums.json").read_text())["models/net.onnx"]
        assert hashlib.sha256((pkg / "models/net.onnx").read_bytes()).hexdigest() == expected, "checksum mismatch"
        s = ort.InferenceSession(str(pkg / "models/net.onnx"), providers=["CPUExecutionProvider"])
        s.run(None, {"x": np.zeros((2, 128), np.float32)})
    '''))
    done = cli("check", "--", sys.executable, str(script), cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if "pins" in ln]
    assert line == (f"warning: src/pkg/checksums.json pins the sha256 of {MODEL}'s original bytes: the package's own "
                    "digest check would reject the shipped model, which swapping sessions cannot show, unless "
                    '`pins = "rewrite"` is set'), done.stdout
    table = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(table.replace('models = ["src/pkg/models/*.onnx"]\n',
                                                          'models = ["src/pkg/models/*.onnx"]\npins = "rewrite"\n'))
    rewritten = cli("check", "--", sys.executable, str(script), cwd=project)
    assert rewritten.returncode == 0, rewritten.stdout + rewritten.stderr
    assert (f"note: src/pkg/checksums.json pins the sha256 of {MODEL}'s original bytes; the build rewrites it to the "
            'shrunk model\'s (pins = "rewrite")') in rewritten.stdout.splitlines(), rewritten.stdout


def test_a_wheel_path_table_without_model_files_names_the_installed_files(tmp_path: Path) -> None:
    """A stub project that rewrites someone else's wheel holds none of the files its `models` match:
    `check` says to name the installed ones, in one line, with the user's own command."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0"\n\n'
                                             '[tool.hatch-shrinkray]\nmodels = ["pkg/models/*.onnx"]\n')
    done = cli("check", "--", "python", "-m", "pytest", "tests", cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line == ("error: `tool.hatch-shrinkray.models` (pkg/models/*.onnx) names files inside the wheel, and this "
                    "project does not hold them (name the installed files: hatch-shrinkray check "
                    "'SITE-PACKAGES/pkg/models/*.onnx' -- python -m pytest tests (SITE-PACKAGES: where the package is "
                    "installed))"), line


# ---------------------------------------------------------------------------------------------
# Numbers: NaN, inf and out-of-range values are refused with one line naming the option.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


@pytest.mark.parametrize(("flags", "expected"), [
    (["--max-flip-rate", "nan"], "--max-flip-rate must be a share from 0 to 1; got nan"),
    (["--threshold", "inf"], "--threshold must be a probability between 0 and 1; got inf"),
    (["--timeout", "nan"], "--timeout must be a number of seconds above 0"),
    (["--timeout", "0"], "--timeout must be a number of seconds above 0"),
])
def test_check_refuses_nan_and_out_of_range_flags(tmp_path: Path, flags: list[str], expected: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    line = one_error(cli("check", str(src), *flags, "--", PY, "-c", "pass", cwd=tmp_path))
    assert expected in line, line


# ---------------------------------------------------------------------------------------------
# check: a model the command rewrites is not judged; a command that hangs is stopped.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


LOADS_AND_REWRITES = textwrap.dedent('''
    import sys
    import numpy as np
    import onnx
    import onnxruntime as ort
    path = sys.argv[1]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, 256), np.float32)})
    m = onnx.load(path)
    m.doc_string = "re-exported by the test suite"
    onnx.save(m, path)
''')


def test_check_refuses_to_judge_a_model_the_command_rewrote(tmp_path: Path, env: dict[str, str]) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "rewrite.py"
    script.write_text(LOADS_AND_REWRITES)
    proc = cli("check", str(src), "--", PY, str(script), str(src), cwd=tmp_path, env=env)
    line = one_error(proc)
    assert line.startswith(f"error: m.onnx: changed while `{PY} {script} {src}` ran (run 1 of 2, with the original "
                           "models)"), line
    assert "make the command leave the model file alone" in line
    assert "REGRESSED" not in proc.stdout + proc.stderr and "hint:" not in proc.stdout


HANGS = textwrap.dedent('''
    import subprocess, sys, time
    from pathlib import Path
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(sys.argv[1]).write_text(str(child.pid))
    time.sleep(600)
''')


def test_check_stops_a_command_that_hangs_with_its_process_group(tmp_path: Path, env: dict[str, str]) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script, pid_file = tmp_path / "hang.py", tmp_path / "child.pid"
    script.write_text(HANGS)
    start = time.monotonic()
    proc = cli("check", str(src), "--timeout", "3", "--", PY, str(script), str(pid_file), cwd=tmp_path, env=env,
               timeout=120)
    assert time.monotonic() - start < 60
    line = one_error(proc)
    assert line == (f"error: `{PY} {script} {pid_file}` did not finish within 3 s; it was stopped with every process "
                    "it started (raise --timeout, or find what hangs)"), line
    grandchild = int(pid_file.read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{grandchild}").exists() or "zombie" in Path(f"/proc/{grandchild}/status").read_text()
    assert files_under(Path(env["TMPDIR"])) in ([], [".ses"])


QUIET_THEN_DONE = textwrap.dedent('''
    import sys, time
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, 256), np.float32)})
    for _ in range(int(sys.argv[2])):
        if sys.argv[3] == "talk":
            print("working", flush=True)
        time.sleep(0.25)
''')


@pytest.mark.parametrize("mode", ["quiet", "talk"])
def test_check_says_when_the_command_is_silent_and_how_to_bound_it(tmp_path: Path, env: dict[str, str],
                                                                    mode: str) -> None:
    """A command that prints nothing for ten progress intervals (five minutes by default; 0.2 s each
    here) gets one line that says it still runs and what stops it; one that prints does not."""
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "quiet.py"
    script.write_text(QUIET_THEN_DONE)
    proc = cli("check", str(src), "--timeout", "60", "--", PY, str(script), str(src), "14", mode, cwd=tmp_path,
               env={**env, "HATCH_SHRINKRAY_PROGRESS_INTERVAL": "0.2"})
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "printed nothing" in ln]
    if mode == "talk":
        assert said == [] and proc.stdout.count("working") == 28, proc.stdout + proc.stderr
        return
    assert said and all(re.fullmatch(r"check: the command has printed nothing for \d+ s and still runs; --timeout 60 "
                                     r"s stops it \(--timeout SECONDS bounds it\)", ln) for ln in said), said


# ---------------------------------------------------------------------------------------------
# Tracebacks that are now one line: sample files, generated inputs, plans, check's report files.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


WRITES_JUNK_REPORTS = textwrap.dedent('''
    import os, sys
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, 256), np.float32)})
    directory = os.environ["HATCH_SHRINKRAY_OUTCOMES"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "zz-junk.json"), "w") as fh:
        fh.write(sys.argv[2])
''')


@pytest.mark.parametrize("junk", ["[" * 100_000, '{"tests": {"t": {"no outcome": 1}}}', "not json"])
def test_check_with_damaged_report_files_is_one_line(tmp_path: Path, env: dict[str, str], junk: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "junk.py"
    script.write_text(WRITES_JUNK_REPORTS)
    line = one_error(cli("check", str(src), "--", PY, str(script), str(src), junk, cwd=tmp_path, env=env))
    assert line.startswith("error: a report the command's processes wrote is damaged (zz-junk.json: "), line
    assert line.endswith("nothing can be judged from this run (something in the command wrote into hatch-shrinkray's "
                         "temporary report directory; run check again)"), line


# ---------------------------------------------------------------------------------------------
# Other tracebacks and hangs of the same kind.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_check_json_onto_a_full_device_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is Linux-only")
    src = save(mlp(), tmp_path / "m.onnx")
    script = tmp_path / "run.py"
    script.write_text("import sys, numpy as np, onnxruntime as ort\n"
                      "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
                      ".run(None, {'x': np.ones((1, 256), np.float32)})\n")
    line = one_error(cli("check", str(src), "--json", "/dev/full", "--", PY, str(script), str(src), cwd=tmp_path,
                         env=env))
    assert line == ("error: /dev/full: cannot write the report: No space left on device (free some space or choose "
                    "another --json path)"), line
