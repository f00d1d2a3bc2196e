"""``hatch-shrinkray bundle``: the models of a directory tree, through the installed console script.

The trees are real: a venv (``python -m venv``) into which pip installs small distributions that
ship a model (built by hatchling, as any backend would), and app folders laid out as PyInstaller's
onedir output is. What a user checks is checked the way they would: ``pip check``, ``pip show -f``,
``pip uninstall``, every RECORD hash, onnxruntime running the shrunk model.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from hardening import CONSOLE_SCRIPT, blocks_reads, cli, files_under, one_error
from hatchling.builders.wheel import WheelBuilder

from onnx_builders import mlp, run, save

PY = sys.executable
LIMIT = 160
PATH_WIDTH = 40
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
MODEL = f"{SITE}/toymodel/models/a.onnx"
SHARED = f"{SITE}/shared_models/m.onnx"
X = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)


def _project(root: Path, name: str, files: dict[str, bytes], packages: list[str]) -> Path:
    root.mkdir(parents=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n'
        f'[tool.hatch.build.targets.wheel]\npackages = {json.dumps(packages)}\n')
    return Path(next(WheelBuilder(str(root)).build(directory=str(root / "dist"), versions=["standard"])))


def put(path: Path) -> Path:
    """A real model (an MLP of 272 KB) at ``path``, its directories made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return save(mlp(), path)


def _onnx_bytes(tmp: Path, seed: int) -> bytes:
    return put(tmp / f"m{seed}.onnx").read_bytes()


def make_venv(tmp_path: Path, *, shared: bool = False) -> Path:
    """A venv with ``toymodel`` installed (a model and a YAML file that pins its sha256), and with
    ``shared``, two distributions that both install ``shared_models/m.onnx``."""
    model = _onnx_bytes(tmp_path, 0)
    pin = f"model: models/a.onnx\nsha256: {hashlib.sha256(model).hexdigest()}\n".encode()
    wheels = [_project(tmp_path / "p-toy", "toymodel", {"toymodel/__init__.py": b"", "toymodel/models/a.onnx": model,
                                                        "toymodel/models.yaml": pin}, ["toymodel"])]
    if shared:
        for name in ("first-user", "second-user"):
            package = name.replace("-", "_")
            wheels.append(_project(tmp_path / f"p-{name}", name, {f"{package}/__init__.py": b"",
                                                                  "shared_models/m.onnx": model},
                                   [package, "shared_models"]))
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip(venv, "install", "--quiet", "--no-deps", "--no-index", *map(str, wheels))
    return venv


def pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PY, "-m", "pip", "--python", str(venv / "bin/python"), *args], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def record_mismatches(site: Path) -> list[str]:
    """Every file an installed distribution's RECORD lists whose bytes or size differ from it."""
    bad = []
    for dist in metadata.distributions(path=[str(site)]):
        for f in dist.files or []:
            if f.hash is None:
                continue
            path = Path(str(f.locate()))
            data = path.read_bytes() if path.exists() else None
            digest = None if data is None else \
                base64.urlsafe_b64encode(hashlib.new(f.hash.mode, data).digest()).rstrip(b"=").decode()
            if digest != f.hash.value or (data is not None and f.size is not None and f.size != len(data)):
                bad.append(str(f))
    return bad


def digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links as links) -> its sha256 (a link: where it points)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


SHARED_ADVICE = ("pins the", "verified on generated inputs only")
"""Advice lines the hook and `wheel` print as well (shipping's wording, not this command's)."""


def short_lines(text: str) -> list[str]:
    """The lines over the limit, with each path counted as 40 characters."""
    over = []
    for line in text.splitlines():
        if any(advice in line for advice in SHARED_ADVICE):
            continue
        counted = re.sub(r"\S*/\S*", "x" * PATH_WIDTH, line)
        if len(counted) > LIMIT:
            over.append(line)
    return over


def test_in_place_on_a_venv_keeps_pip_whole(tmp_path: Path, env: dict[str, str]) -> None:
    """The model ships shrunk and still answers; RECORD matches every file it lists, `pip check`
    passes, `pip show -f` lists the model, a second run ships the same bytes without shrinking, and
    `pip uninstall` removes everything the distribution installed."""
    venv = make_venv(tmp_path)
    original = (venv / MODEL).read_bytes()
    done = cli("bundle", str(venv), "--in-place", env=env)
    assert done.returncode == 0, done.stderr
    assert not short_lines(done.stderr + done.stdout), short_lines(done.stderr + done.stdout)
    shrunk = (venv / MODEL).read_bytes()
    assert len(shrunk) < 0.35 * len(original)
    assert f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> " in done.stderr, done.stderr
    assert done.stdout.startswith(f"{venv}: shrunk in place (1 model, 272.54 KB -> "), done.stdout
    assert "1 RECORD file(s) follow their files" in done.stdout
    kept = tmp_path / "original.onnx"
    kept.write_bytes(original)
    (a,), (b,) = run(kept, {"x": X}), run(venv / MODEL, {"x": X})
    assert (np.asarray(a).argmax(1) == np.asarray(b).argmax(1)).all()
    assert record_mismatches(venv / SITE) == []
    pip(venv, "check")
    assert "toymodel/models/a.onnx" in pip(venv, "show", "-f", "toymodel").stdout
    assert (venv / ".shrinkray-manifest.json").is_file()
    assert not [p for p in files_under(venv) if "shrinkray-new" in p or "shrinkray-old" in p or "journal" in p]

    before = digests(venv)
    again = cli("bundle", str(venv), "--in-place", env=env)
    assert again.returncode == 0, again.stderr
    # the manifest names these bytes: shipped as they are, not shrunk again
    assert f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> " in again.stderr, again.stderr
    assert "already shrunk (its manifest names these bytes)" in again.stderr, again.stderr
    assert again.stdout.startswith(f"{venv}: unchanged: nothing to replace"), again.stdout
    assert digests(venv) == before

    pip(venv, "uninstall", "--yes", "toymodel")
    assert not (venv / SITE / "toymodel").exists()
    assert not list((venv / SITE).glob("toymodel-*"))


def test_a_copy_leaves_the_input_alone_and_is_the_same_bytes_every_time(tmp_path: Path,
                                                                       env: dict[str, str]) -> None:
    """-o OUT: the input tree is untouched; two runs with empty caches write identical trees; the
    copy's RECORD matches its files, and an existing OUT is refused without --force."""
    venv = make_venv(tmp_path)
    before = digests(venv)
    first = cli("bundle", str(venv), "-o", str(tmp_path / "one"), env=env)
    assert first.returncode == 0, first.stderr
    assert digests(venv) == before
    other = {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(tmp_path / "cache2")}
    second = cli("bundle", str(venv), "-o", str(tmp_path / "two"), env=other)
    assert second.returncode == 0, second.stderr
    assert digests(tmp_path / "one") == digests(tmp_path / "two")
    assert digests(tmp_path / "one")[MODEL] != before[MODEL]
    assert record_mismatches(tmp_path / "one" / SITE) == []
    refused = cli("bundle", str(venv), "-o", str(tmp_path / "one"), env=env)
    assert refused.returncode == 1
    assert one_error(refused) == f"error: {tmp_path / 'one'}: the output exists (use --force to replace it)"
    forced = cli("bundle", str(venv), "-o", str(tmp_path / "one"), "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    assert digests(tmp_path / "one") == digests(tmp_path / "two")
    assert not [p.name for p in tmp_path.iterdir() if "shrinkray" in p.name]


def test_pins_rewrite_and_a_model_two_distributions_install(tmp_path: Path, env: dict[str, str]) -> None:
    """The YAML file that pins the model's sha256 names the shrunk model's with --pins rewrite (and
    its RECORD row follows); a model two distributions list is shrunk once and both RECORDs follow."""
    venv = make_venv(tmp_path, shared=True)
    done = cli("bundle", str(venv), "--in-place", "--pins", "rewrite", env=env)
    assert done.returncode == 0, done.stderr
    shrunk = hashlib.sha256((venv / MODEL).read_bytes()).hexdigest()
    assert f"sha256: {shrunk}" in (venv / SITE / "toymodel/models.yaml").read_text()
    assert f"shrinkray: {SHARED}: listed by 2 installed distributions (first_user-0.1.0, second_user-0.1.0); " \
           "each RECORD now has its new sha256 and size" in done.stderr, done.stderr
    assert (venv / SHARED).read_bytes() == (venv / MODEL).read_bytes()
    assert record_mismatches(venv / SITE) == []
    assert "3 RECORD file(s) follow their files" in done.stdout
    pip(venv, "check")


def test_a_link_is_shrunk_through_its_target_once(tmp_path: Path, env: dict[str, str]) -> None:
    """An app folder whose model is also reachable through a link (and one link that leaves the
    tree): the target is shrunk once, the links stay links, the outside file is not touched."""
    app = tmp_path / "app"
    put(app / "_internal/pkg/models/a.onnx")
    (app / "_internal/pkg/models/alias.onnx").symlink_to("a.onnx")
    outside = put(tmp_path / "elsewhere/b.onnx")
    (app / "_internal/pkg/models/b.onnx").symlink_to(outside)
    outside_bytes = outside.read_bytes()
    done = cli("bundle", str(app), "--in-place", env=env)
    assert done.returncode == 0, done.stderr
    assert "shrinkray: _internal/pkg/models/alias.onnx: a link to _internal/pkg/models/a.onnx, which is shrunk " \
           "(once); the link stays a link" in done.stderr
    assert f"shrinkray: _internal/pkg/models/b.onnx: left as it is, a link out of the tree (to {outside})" \
        in done.stderr
    assert done.stderr.count("_internal/pkg/models/a.onnx (272.54 KB): int8...") == 1
    assert (app / "_internal/pkg/models/alias.onnx").is_symlink()
    assert (app / "_internal/pkg/models/a.onnx").stat().st_size < 100_000
    assert outside.read_bytes() == outside_bytes
    assert not short_lines(done.stderr), short_lines(done.stderr)


def test_bad_trees_get_one_line_and_lose_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    """No model under DIR, no such DIR, an -o inside DIR, a check command that names nothing under
    DIR: one line each, nothing written."""
    empty = tmp_path / "empty"
    (empty / "pkg").mkdir(parents=True)
    (empty / "pkg/readme.txt").write_text("no models here")
    done = cli("bundle", str(empty), "-o", str(tmp_path / "out"), env=env)
    assert done.returncode == 1
    assert one_error(done) == (f"error: {empty}: no model to shrink: no file matches **/*.onnx (pass --models GLOB, "
                               "relative to DIR)")
    assert not (tmp_path / "out").exists()
    missing = cli("bundle", str(tmp_path / "nope"), "--in-place", env=env)
    assert one_error(missing).startswith(f"error: {tmp_path / 'nope'}: no such directory")
    assert files_under(empty) == ["pkg/readme.txt"]
    app = tmp_path / "app"
    put(app / "models/a.onnx")
    inside = cli("bundle", str(app), "-o", str(app / "out"), env=env)
    assert one_error(inside) == (f"error: {app / 'out'}: the output {app / 'out'} and the input {app} overlap (choose "
                                 "an -o directory outside the input, or use --in-place)")
    assert files_under(app) == ["models/a.onnx"]
    blind = cli("bundle", str(app), "-o", str(tmp_path / "out"), "--", "true", env=env)
    assert one_error(blind) == (f"error: the command names nothing under {app}, so its second run could not judge "
                                f"the shrunk copy in {tmp_path / 'out'} (name the app by its path inside {app} "
                                f"(e.g. -- {app}/app ARGS), or use --in-place)")
    assert not (tmp_path / "out").exists() and files_under(app) == ["models/a.onnx"]
    neither = cli("bundle", str(empty), env=env)
    assert neither.returncode != 0 and len(neither.stderr.strip().splitlines()) == 1


def test_a_read_only_model_and_a_read_only_directory(tmp_path: Path, env: dict[str, str]) -> None:
    """A read-only model file is replaced whole and keeps its mode (its directory is writable); a
    directory the user cannot write is one line, and every file stays as it was."""
    app = tmp_path / "app"
    put(app / "models/a.onnx")
    (app / "models/a.onnx").chmod(0o444)
    done = cli("bundle", str(app), "--in-place", env=env, drop_dac=True)
    assert done.returncode == 0, done.stderr
    assert (app / "models/a.onnx").stat().st_mode & 0o777 == 0o444
    assert (app / "models/a.onnx").stat().st_size < 100_000

    locked = tmp_path / "locked"
    put(locked / "models/a.onnx")
    if not blocks_reads(tmp_path):
        pytest.skip("permission bits do not apply to this process (root without a way to drop DAC override)")
    before = digests(locked)
    (locked / "models").chmod(0o555)
    try:
        refused = cli("bundle", str(locked), "--in-place", env=env, drop_dac=True)
    finally:
        (locked / "models").chmod(0o755)
    assert refused.returncode == 1
    assert one_error(refused) == (f"error: {locked / 'models/a.onnx'}: cannot write beside this file: Permission "
                                  "denied (make its directory writable, free some space there, or write the shrunk "
                                  "tree elsewhere with -o OUT)")
    assert digests(locked) == before


def test_a_tree_on_another_file_system_than_the_cache(tmp_path: Path, env: dict[str, str]) -> None:
    """The cache and the work directory on /dev/shm (tmpfs), the tree here: nothing is renamed
    across file systems, and the second run is served by the cache."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) beside the test's temporary directory")
    cache = Path(os.environ.get("TMPDIR", "/tmp"))
    elsewhere = Path(subprocess.run(["mktemp", "-d", "-p", str(shm)], capture_output=True, text=True,
                                    check=True).stdout.strip())
    try:
        other = {**env, "HATCH_SHRINKRAY_CACHE_DIR": str(elsewhere / "cache"), "TMPDIR": str(elsewhere)}
        app = tmp_path / "app"
        put(app / "models/a.onnx")
        done = cli("bundle", str(app), "-o", str(tmp_path / "out"), env=other)
        assert done.returncode == 0, done.stderr
        again = cli("bundle", str(app), "-o", str(tmp_path / "out2"), env=other)
        assert again.returncode == 0, again.stderr
        assert ", cached" in again.stderr or "cached" in again.stderr
        assert digests(tmp_path / "out") == digests(tmp_path / "out2")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert cache


SELFTEST = '''\
import sys, pathlib
import numpy as np, onnxruntime as ort
here = pathlib.Path(__file__).parent
x = np.load(here / "x.npy")
out = ort.InferenceSession(str(here / "models/a.onnx")).run(None, {"x": x})[0]
expected = np.load(here / "expected.npy")
ok = (out.argmax(1) == expected.argmax(1)).all() if sys.argv[1:] == ["labels"] else np.array_equal(out, expected)
print("selftest", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
'''


def _app_with_selftest(root: Path) -> Path:
    model = put(root / "models/a.onnx")
    np.save(root / "x.npy", X)
    np.save(root / "expected.npy", run(model, {"x": X})[0])
    (root / "selftest.py").write_text(SELFTEST)
    return root


def test_the_apps_own_selftest_judges_the_shrunk_tree(tmp_path: Path, env: dict[str, str]) -> None:
    """`-- COMMAND` runs the app's self-test on the original tree and on the shrunk one (its arguments
    that name DIR name OUT the second time): a test that only wants the same labels passes; one that
    wants the very same floats fails, and then nothing is written (-o) or every file is put back
    (--in-place)."""
    app = _app_with_selftest(tmp_path / "app")
    before = digests(app)
    ok = cli("bundle", str(app), "-o", str(tmp_path / "out"), "--", PY, str(app / "selftest.py"), "labels", env=env)
    assert ok.returncode == 0, ok.stderr
    assert f"check: run 2 of 2, with the shrunk tree: {PY} {tmp_path / 'out' / 'selftest.py'} labels" in ok.stderr
    assert "check: passed: every test and the exit status held" in ok.stdout, ok.stdout
    assert (tmp_path / "out/models/a.onnx").stat().st_size < 100_000

    strict = cli("bundle", str(app), "-o", str(tmp_path / "strict"), "--", PY, str(app / "selftest.py"), env=env)
    assert strict.returncode == 1, strict.stderr
    assert "check: regressed: exit status: 0 -> 1" in strict.stdout, strict.stdout
    assert "check: failed: 1 regression(s); nothing was changed" in strict.stdout
    assert not (tmp_path / "strict").exists()

    in_place = cli("bundle", str(app), "--in-place", "--", PY, str(app / "selftest.py"), env=env)
    assert in_place.returncode == 1, in_place.stderr
    assert digests(app) == before
    assert not [p for p in files_under(app) if "shrinkray" in p]
    assert not [p.name for p in tmp_path.iterdir() if "shrinkray" in p.name]


def test_the_dockerfile_build_stage_on_a_venv(tmp_path: Path, env: dict[str, str]) -> None:
    """The `bundle` line of docs/bundles.md's Dockerfile, run as written on a venv (no container
    engine here): /venv is the venv, /tools/bin/hatch-shrinkray the console script, the package is
    the toy one; the recording is made as the page says, by the app's own use."""
    page = (Path(__file__).parent.parent / "docs/bundles.md").read_text(encoding="utf-8")
    dockerfile = page.split("<!-- dockerfile -->\n```dockerfile\n", 1)[1].split("```", 1)[0]
    (line,) = [ln for ln in dockerfile.splitlines() if "hatch-shrinkray bundle" in ln]
    venv = make_venv(tmp_path)
    use = f"import numpy as np, onnxruntime as ort; s = ort.InferenceSession({str(venv / MODEL)!r})\n" \
          "for i in range(20): s.run(None, {'x': np.random.default_rng(i).standard_normal((4, 256), np.float32)})"
    recorded = cli("record", "-o", str(tmp_path / "shrinkray-inputs"), "--", PY, "-c", use, env=env)
    assert recorded.returncode == 0, recorded.stderr
    command = line.removeprefix("RUN ").replace("/tools/bin/hatch-shrinkray", str(CONSOLE_SCRIPT)) \
        .replace("/venv", str(venv)).replace("/shrinkray-inputs", str(tmp_path / "shrinkray-inputs")) \
        .replace("rapidocr_onnxruntime", "toymodel")
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    shipped = f"shrinkray: {MODEL}: shipped shrunk, 272.54 -> "
    assert "recorded" in next((ln for ln in done.stderr.splitlines() if ln.startswith(shipped)), done.stderr)
    assert (venv / MODEL).stat().st_size < 100_000
    assert record_mismatches(venv / SITE) == []
    pip(venv, "check")
    pip(venv, "uninstall", "--yes", "toymodel")
    assert not (venv / SITE / "toymodel").exists()


def test_shrink_datas_maps_a_specs_models_to_shrunk_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec line's library call on a TOC as PyInstaller's Analysis makes it: the model's entry
    points at a verified shrunk copy under the work directory, the file that pins its sha256 at a
    rewritten copy (pins="rewrite"), every other entry is kept as it was, and nothing collected is
    changed; a second build gets the same bytes from the cache; an unknown option is one line."""
    from hatch_shrinkray import ShrinkrayError, shrink_datas

    monkeypatch.setenv("HATCH_SHRINKRAY_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    model = put(site / "pkg/models/a.onnx")
    (site / "pkg/config.yaml").write_text(f"sha256: {hashlib.sha256(model.read_bytes()).hexdigest()}\n")
    (site / "other").mkdir()
    (site / "other/readme.txt").write_text("hello")
    before = digests(site)
    datas = [("pkg/models/a.onnx", str(model), "DATA"), ("pkg/config.yaml", str(site / "pkg/config.yaml"), "DATA"),
             ("other/readme.txt", str(site / "other/readme.txt"), "DATA")]
    out = shrink_datas(datas, workdir=tmp_path / "build", pins="rewrite", project=tmp_path)
    shrunk = Path(out[0][1])
    assert out[0][0] == "pkg/models/a.onnx" and shrunk.is_relative_to(tmp_path / "build/shrinkray")
    assert shrunk.stat().st_size < 100_000
    assert hashlib.sha256(shrunk.read_bytes()).hexdigest() in Path(out[1][1]).read_text()
    assert out[2] == datas[2]
    assert digests(site) == before
    first = shrunk.read_bytes()
    again = shrink_datas(datas, workdir=tmp_path / "build2", pins="rewrite", project=tmp_path)
    assert Path(again[0][1]).read_bytes() == first
    with pytest.raises(ShrinkrayError, match="shrink_datas\\(\\) takes no option colour"):
        shrink_datas(datas, workdir=tmp_path / "build3", colour="red")
