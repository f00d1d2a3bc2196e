"""Running a command under recording, and turning what its processes wrote into one file per model.

Every Python process of the command finds a ``sitecustomize`` on ``PYTHONPATH`` (in a temporary
directory, beside a link to this package so that other interpreters can import it too) that
instruments onnxruntime; pytest sessions also load a small plugin (``PYTEST_PLUGINS``) that labels
each call with the test it ran in. Each run has a directory of its own, ``DIR/.parts/<run id>``:
its processes leave a boot marker there, and at exit their parts (one per model) and a report
(``capture.process``). ``finish`` merges this run's parts per model (``recording.merge``) and writes
``DIR/<model>-<sha256>.npz``, replacing an older recording of the same model or adding to it
(``recording.mode``); it removes only its
own run directory (and ``DIR/.parts`` if that is then empty), so concurrent runs into one directory
each keep theirs and nothing else in ``DIR/.parts`` is touched.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import shlex
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hatch_shrinkray import progress
from hatch_shrinkray.capture import env, guard
from hatch_shrinkray.capture.parts import read_part
from hatch_shrinkray.capture.process import Report
from hatch_shrinkray.capture.recorder import OVER_CAP, TOO_LARGE
from hatch_shrinkray.codec import encode, loads
from hatch_shrinkray.errors import ShrinkrayError, quoted
from hatch_shrinkray.evidence import MIN_UNITS
from hatch_shrinkray.files import file_sha256, temporary_prefix
from hatch_shrinkray.hints import LINE_LIMIT, counted, default_recording
from hatch_shrinkray.method_facts import facts
from hatch_shrinkray.recording.caps import Caps
from hatch_shrinkray.recording.format import BYTES_MODEL, file_name
from hatch_shrinkray.recording.matching import named_for
from hatch_shrinkray.recording.merge import Merged, Part, earlier_parts, merge
from hatch_shrinkray.recording.mode import REPLACE
from hatch_shrinkray.recording.storage import read_meta, write_stored
from hatch_shrinkray.result import human, render_table
from hatch_shrinkray.signals import deferred

PARTS = ".parts"
UNITS_PLUGIN = "hatch_shrinkray_units"
"""The pytest plugin that labels calls by test, as a module in the ``sitecustomize`` directory: it
imports ``capture.testunits`` if it can and is empty otherwise, so a pytest that cannot import this
package still runs."""
UNITS_SHIM = '''"""Written by hatch-shrinkray record: label onnxruntime calls with the pytest test they run in."""
try:
    from hatch_shrinkray.capture.testunits import pytest_runtest_protocol  # noqa: F401
except Exception:
    pass
'''

SITECUSTOMIZE = '''\
"""Written by hatch-shrinkray record: instrument onnxruntime in this process, then run the
sitecustomize this file shadows, if any."""
import os, sys


def _hatch_shrinkray_start():
    try:
        from hatch_shrinkray.capture import boot
    except Exception as exc:  # never break the recorded program
        sys.stderr.write(f"hatch-shrinkray: not recording in {sys.executable}: {exc}\\n")
        return
    boot.install()


def _hatch_shrinkray_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        sys.modules["sitecustomize"] = me
    finally:
        sys.path[:] = saved


_hatch_shrinkray_start()
_hatch_shrinkray_chain()
'''


@dataclass(frozen=True)
class Recorded:
    """One model's recording as written, for the summary."""

    path: Path | None
    """None when every call was skipped (nothing to write)."""
    merged: Merged
    replaced: int = 0
    """Samples of an earlier run's recording of the same model that this one replaced."""
    added: int = 0
    """Samples of an earlier run's recording of the same model that this one added to."""


@dataclass
class Finished:
    """What a run left: the recordings, and how its processes ended."""

    recorded: list[Recorded] = field(default_factory=list)
    booted: int = 0
    reports: list[Report] = field(default_factory=list)
    lost: int = 0
    """Processes that ran models and never reported (os._exit, a signal, a crash, a full disk)."""
    errors: list[str] = field(default_factory=list)
    """What went wrong besides (a process report that cannot be read): warnings, nothing lost."""
    caps: Caps = field(default_factory=Caps)
    unwritten: list[str] = field(default_factory=list)
    """Recordings, or parts of them, that are not on disk: a process that could not write its part,
    a part that cannot be read, a recording that could not be written here."""

    @property
    def incomplete(self) -> list[str]:
        """What was meant to be written and is not complete on disk, one line each, for people."""
        lost = ([f"{self.lost} Python process(es) ran models and ended without writing what they recorded "
                 "(os._exit, a signal, a crash or a full disk): their calls are missing"] if self.lost else [])
        return [*self.unwritten, *lost]


@dataclass(frozen=True)
class Expected:
    """A model the project configures, to say when the command never ran it."""

    relpath: str
    sha256: str
    method: str


def installed(globs: Sequence[str], done: Finished, method: str = "int8") -> list[Expected]:
    """The models a wheel-path table's ``globs`` (paths inside the installed package, which the
    project does not hold) select, found beside the models the command ran: a glob that matches the
    end of a recorded model's path is tried from that model's install root. Globs with ``**`` and
    models the command never came near are not found (nothing says where they are installed)."""
    found: dict[str, Expected] = {}
    for glob in globs:
        depth = len(PurePosixPath(glob).parts)
        if "**" in glob or PurePosixPath(glob).is_absolute():
            continue
        for item in done.recorded:
            source = Path(item.merged.source)
            if not item.merged.source or len(source.parts) <= depth:
                continue
            base = source.parents[depth - 1]
            if not fnmatch.fnmatchcase(source.relative_to(base).as_posix(), glob):
                continue
            for path in sorted(base.glob(glob)):
                rel = path.relative_to(base).as_posix()
                if path.is_file() and rel not in found:
                    with contextlib.suppress(OSError):
                        found[rel] = Expected(rel, file_sha256(path), method)
    return list(found.values())


Named = Callable[[str], "str | None"]
"""A model's sha256 -> the project's file with those bytes (None: no such file)."""


@dataclass(frozen=True)
class Setup:
    """Where the recording goes next: the project's table and its ``inputs``, for the last line."""

    table: str | None = None
    """The TOML path of the project's hatch-shrinkray table; None without a project that has one."""
    inputs: str | None = None
    """Its ``inputs`` value, as written."""
    root: Path | None = None
    hook: str = ""
    """The TOML path of the build hook's table, named when the project has no table yet."""


@contextmanager
def recording_environment(output: Path, caps: Caps | None = None) -> Iterator[tuple[dict[str, str], Path]]:
    """Environment variables that make Python processes record into a new run directory under
    ``output``, and that directory; the temporary ``sitecustomize`` directory is removed afterwards
    (the run directory is ``finish``'s, or ``discard``'s)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        (output / PARTS).mkdir(exist_ok=True)
        with deferred():
            run_dir = output / PARTS / f"{os.getpid()}-{secrets.token_hex(6)}"
            run_dir.mkdir()
    except OSError as exc:
        with contextlib.suppress(OSError):
            (output / PARTS).rmdir()  # only when empty: other runs' directories stay
        raise ShrinkrayError(f"cannot create the recording directory: {exc.strerror or exc}", path=str(output),
                             hint="choose a writable --output directory") from exc
    try:
        with instrumented_path() as (path, site):
            (site / f"{UNITS_PLUGIN}.py").write_text(UNITS_SHIM, encoding="utf-8")
            plugins = ",".join(p for p in (os.environ.get("PYTEST_PLUGINS", ""), UNITS_PLUGIN) if p)
            caps = caps or Caps()
            yield ({env.RECORD: str(run_dir.resolve()), env.RECORD_SAMPLES: str(caps.samples),
                    env.RECORD_BYTES: str(caps.bytes), env.RECORD_CEILING: str(caps.ceiling),
                    env.RECORD_MEMORY: str(caps.memory), "PYTHONPATH": path, "PYTEST_PLUGINS": plugins}, run_dir)
    except BaseException:
        discard(run_dir)
        raise


@contextmanager
def instrumented_path() -> Iterator[tuple[str, Path]]:
    """A ``PYTHONPATH`` value whose first entry is a temporary directory with the ``sitecustomize``
    that instruments onnxruntime (what it does is up to the environment, ``capture.env``), and that
    directory; it is removed afterwards."""
    site: Path | None = None
    try:
        with deferred():  # a signal right after mkdtemp is delivered inside the try, which cleans up
            site = Path(tempfile.mkdtemp(prefix=temporary_prefix("record")))
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        package = Path(__file__).resolve().parents[1]
        # No symlinks (Windows without the privilege): interpreters of this environment still work.
        with contextlib.suppress(OSError):
            (site / package.name).symlink_to(package, target_is_directory=True)
        yield os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p), site
    finally:
        if site is not None:
            shutil.rmtree(site, ignore_errors=True)


def discard(run_dir: Path) -> None:
    """Remove a run directory (ours alone) and ``.parts`` if nothing else is left in it."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()


def record(command: Sequence[str], output: Path, caps: Caps | None = None, root: Path | None = None,
           named: Named | None = None, *, mode: str = REPLACE) -> tuple[int, Finished]:
    """Run ``command`` with recording on; its exit code and what was recorded. Directories it
    created for ``output`` are removed again when nothing was written into them; ``named``: the
    project's file of a model loaded from bytes, after which its recording is named; ``mode``:
    what to do with an earlier recording of a model (``recording.mode``)."""
    if not command:
        raise ShrinkrayError("no command to record", hint="hatch-shrinkray record --output DIR -- COMMAND [ARGS...]")
    created = missing_directories(output)
    try:
        with recording_environment(output, caps) as (variables, run_dir):
            try:
                with progress.task(f"record: running `{shlex.join(command)}`"), progress.external():
                    returncode = guard.run(command, {**os.environ, **variables})  # ends with record
            except OSError as exc:
                raise ShrinkrayError(f"cannot run {command[0]}: {exc.strerror or exc}",
                                     hint="check the command after --") from exc
        return returncode, finish(run_dir, output, caps, root or project_root(output), named, mode=mode)
    finally:
        remove_if_empty(created)


def remove_if_empty(directories: Sequence[Path]) -> None:
    """Remove ``directories`` (deepest first) that are empty: a recording or anything else in one stays."""
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()


def missing_directories(output: Path) -> list[Path]:
    """``output`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    for directory in (output, *output.parents):
        if directory.exists():
            break
        missing.append(directory)
    return missing


def project_root(output: Path) -> Path:
    """The nearest directory with a ``pyproject.toml`` at or above ``output``, else the working directory."""
    here = output.resolve()
    return next((d for d in (here, *here.parents) if (d / "pyproject.toml").is_file()), None) or Path.cwd()


def finish(run_dir: Path, output: Path, caps: Caps | None = None, root: Path | None = None,
           named: Named | None = None, *, mode: str = REPLACE) -> Finished:
    """Merge the parts of the run in ``run_dir`` into one recording per model in ``output``; removes
    ``run_dir``. A part that cannot be read is reported, the others are still merged."""
    done = Finished(caps=caps or Caps())
    try:
        files = sorted(run_dir.iterdir()) if run_dir.is_dir() else []
        boots = {p.stem for p in files if p.suffix == ".boot"}
        using = {p.stem for p in files if p.suffix == ".run"}
        for path in (p for p in files if p.suffix == ".done"):
            try:
                report: Report = loads(Report, path.read_bytes())
            except (OSError, ValueError):  # codec.Invalid too
                done.errors.append(f"unreadable process report {path.name}")
                continue
            boots.add(path.stem)
            using.discard(path.stem)
            done.reports.append(report)
            done.unwritten += [f"process {report.pid} could not write the recording of {e}: its calls are "
                               "missing" for e in report.errors]
        done.booted = len(boots)
        done.lost = len(using)
        by_model: dict[str, list[Part]] = defaultdict(list)
        parts = [p for p in files if p.suffix == ".part"]
        for path in progress.tracked(parts, "record: reading the parts the processes wrote"):
            try:
                meta, samples = read_part(path)
            except ShrinkrayError as exc:
                done.unwritten.append(f"a part that a process wrote could not be read ({exc.message}): its calls "
                                      "are missing")
                continue
            by_model[meta.model_sha256].append(Part(meta, samples))
        for sha in progress.tracked(sorted(by_model), "record: merging and writing recordings",
                                    detail=lambda sha: by_model[sha][0].meta.model):
            earlier = _recordings_of(output, sha)
            try:
                added = [] if mode == REPLACE else earlier_parts(output, sha, root or Path.cwd())
            except ShrinkrayError as exc:
                done.unwritten.append(f"{Path(exc.path or '').name} cannot be read ({exc.message}): this run's samples "
                                      "were not added to it; move it away or record with `--mode replace`")
                continue
            merged = merge([*by_model[sha], *added], caps or Caps(), root or Path.cwd())
            written = _write(output, merged, done.unwritten, named, earlier)
            held = sum(earlier.values()) if written is not None else 0
            done.recorded.append(Recorded(written, merged, replaced=0 if added else held, added=held if added else 0))
        done.recorded.sort(key=lambda r: (r.path is None, r.path.name if r.path else r.merged.meta.model))
        return done
    finally:
        discard(run_dir)


def _write(output: Path, merged: Merged, errors: list[str], named: Named | None = None,
           earlier: Iterable[Path] = ()) -> Path | None:
    """Write ``merged`` (in place of the model's ``earlier`` recordings); None when it holds no sample.
    Its file is named after the model (``toy_mlp-<sha>.npz``): a model loaded from bytes after the
    project's file with those bytes (``named``), if any."""
    if not merged.samples:
        return None
    sha = merged.meta.model_sha256
    model = merged.meta.model
    if model == BYTES_MODEL and named is not None:
        model = named(sha) or model
    path = output / file_name(sha, model)
    try:
        write_stored(path, encode(merged.meta), merged.samples)
    except OSError as exc:
        errors.append(f"could not write the recording of {merged.meta.model} ({path.name}): "
                      f"{exc.strerror or exc}; nothing of it was kept")
        return None
    for old in earlier:
        if old != path:
            with contextlib.suppress(OSError):
                old.unlink()
    return path


def _recordings_of(output: Path, sha: str) -> dict[Path, int]:
    """The readable recordings of this model already in ``output`` (an earlier run's), and their samples."""
    found = {}
    for old in named_for(output, sha):
        with contextlib.suppress(ShrinkrayError):
            meta = read_meta(old)
            if meta.model_sha256 == sha:
                found[old] = meta.samples
    return found


def summary(done: Finished, output: Path, expected: Sequence[Expected] = (), command: Sequence[str] = (),
            setup: Setup | None = None) -> str:
    """The coverage table (per model: calls, what ran and what was kept, bytes, skipped feeds; the
    project's configured models that never ran), what went wrong and, when something was recorded
    and ``setup`` says where it goes, the next step, for people."""
    written = [r for r in done.recorded if r.path is not None]
    lines = _coverage(done, output, expected, written, command)
    for item in done.recorded:
        lines += _notes(item, done.caps)
    lines += _never_ran(done, expected, bool(written))
    lines += [f"warning: {quoted(e, 300)}" for e in done.errors]
    if written and setup is not None:
        lines.append(next_step(output, setup, command, [r.merged for r in written],
                               tests=not _ran_no_tests(written, command)))
    return "\n".join(lines)


def _ran_no_tests(written: Sequence[Recorded], command: Sequence[str]) -> bool:
    """Whether the recorded command surely ran no pytest test: pytest is not named in it, and no kept
    call of any model belongs to a test (a stream's units do not say, so a recurrent model leaves it
    open). Then ``check`` with this command could compare only its exit status."""
    if any("pytest" in arg or "py.test" in arg for arg in command):
        return False
    metas = [r.merged.meta for r in written]
    return not any(m.streams for m in metas) and not any(unit.startswith("test:") for m in metas for unit in m.units)


def _coverage(done: Finished, output: Path, expected: Sequence[Expected], written: Sequence[Recorded],
              command: Sequence[str]) -> list[str]:
    """The table and the line that totals it (or why nothing was recorded)."""
    if not done.recorded:
        return [f"nothing recorded into {output}: {_why_nothing(done, command)}"]
    rows = [["model", "recording", "calls", "ran", "kept", "bytes", "skipped"]]
    configured = {model.sha256: model.relpath for model in expected}  # a model loaded from bytes: its file's
    for item in done.recorded:
        meta = item.merged.meta
        size = item.path.stat().st_size if item.path is not None else 0
        skipped = "; ".join(f"{n} {reason}" for reason, n in meta.skipped) or "-"
        model = configured.get(meta.model_sha256, meta.model) if meta.model == BYTES_MODEL else meta.model
        rows.append([model, item.path.name if item.path else "(nothing kept)", str(meta.calls),
                     item.merged.seen, item.merged.kept, human(size), skipped])
    recorded = {r.merged.meta.model_sha256 for r in done.recorded}
    rows += [[m.relpath, "(never ran)", "0", "-", "-", "-", "-"] for m in expected if m.sha256 not in recorded]
    total = sum(r.path.stat().st_size for r in written if r.path is not None)
    return [render_table(rows), f"recorded {len(written)} model(s) into {output} ({human(total)} on disk)"]


def _notes(item: Recorded, caps: Caps) -> list[str]:
    """What a model's recording kept fewer of than it might, and why."""
    model = item.merged.meta.model
    lines = []
    if item.replaced:
        lines.append(f"note: {model}: replaced an earlier recording ({item.replaced} samples); "
                     "`hatch-shrinkray record --mode add` adds to it instead")
    if item.added:
        lines.append(f"note: {model}: added to an earlier recording ({item.added} samples)")
    if item.merged.repeated_streams:
        n = item.merged.repeated_streams
        lines.append(f"note: {model}: {n} stream{'s' * (n != 1)} fed the very steps of another "
                     f"(or of its start) and {'were' if n != 1 else 'was'} merged into it")
    if item.merged.short is not None:
        kept, ran, bound, needed = item.merged.short
        # A bound is named only where it is above the one in force; with fewer units than evidence
        # needs, no bound gives them, only more of the program's use.
        if ran < MIN_UNITS:
            fix = "record more of its use"
        elif needed > (caps.memory if bound == "--max-memory" else caps.bytes):
            fix = f"{bound} {needed} would keep {MIN_UNITS}"
        else:
            fix = f"a larger {bound} keeps more of them"
        lines.append(f"note: {model}: kept {kept} of {ran} independent units, fewer than the "
                     f"{MIN_UNITS} that evidence needs: {fix}")
    if item.merged.repeats is not None:
        kept, ran = item.merged.repeats
        lines.append(f"note: {model}: kept {kept} distinct units of {ran} that ran ({MIN_UNITS} make evidence): "
                     "the rest repeat kept feeds; record more varied ones")
    reasons = dict(item.merged.meta.skipped)
    if reasons.get(OVER_CAP):
        lines.append(f"note: {model}: {reasons[OVER_CAP]} feed(s) alone take more than "
                     f"{human(caps.feed_bytes)} in the file and were left out; raise --max-bytes to keep "
                     "such feeds")
    if reasons.get(TOO_LARGE):
        lines.append(f"note: {model}: {reasons[TOO_LARGE]} feed(s) alone take more than "
                     f"{human(caps.feed_memory)} once loaded and were left out (raise --max-memory, 16x that)")
    return lines


def _never_ran(done: Finished, expected: Sequence[Expected], written: bool) -> list[str]:
    """A line per configured model the command never ran (the user records one that runs it)."""
    recorded = {r.merged.meta.model_sha256 for r in done.recorded}
    lines = []
    for model in (m for m in expected if m.sha256 not in recorded):
        need = facts(model.method).unrecorded or "its build verifies it on generated inputs only"
        lines.append(f"note: {model.relpath} was never loaded: record a command that loads it"
                     f"{' too' if written else ''} ({need})")
    return lines


def next_step(output: Path, setup: Setup, command: Sequence[str], models: Sequence[Merged] = (), *,
              tests: bool = True) -> str:
    """What to do with a recording, in one line: point the build at it (the key of the project's
    table, or the flag on the command line, naming the models it recorded as the user can pass
    them), then let ``check`` run the package's tests with the shrunk models: the recorded command
    when it ran tests (``tests``), else pytest (see ``_judge_step``). A recording outside the
    project is not one its build can read (nor its sdist, nor another machine)."""
    shown = _relative(output, setup.root)
    tail = f"-- {shlex.join(command) if command else 'COMMAND'}"
    if setup.table is None:
        named = " ".join(shlex.quote(m) for m in _passable(models, setup.root)) or "MODEL..."
        return (f"next: `hatch-shrinkray check {named} --inputs {shown} {tail}` (`--inputs {shown}`: `shrink`, "
                "`wheel` too)")
    if setup.root is not None and not output.resolve().is_relative_to(setup.root.resolve()):
        inside = default_recording(setup.root)
        return (f"next: a build reads a recording inside its project only: record again with `-o {inside}`, then set "
                f"`inputs = \"{inside}\"`")
    if setup.inputs is not None and setup.root is not None and \
            (setup.root / setup.inputs).resolve() == output.resolve():
        head = f"next: the build reads this recording (`inputs = \"{setup.inputs}\"`)"
    else:
        head = f"next: set `inputs = \"{shown}\"` in [{setup.table}]"
    line = f"{head}; {_judge_step(tail, tests)}"
    if counted(line) <= LINE_LIMIT or not tests:
        return line
    return f"{head}; {_judge_step('-- COMMAND', tests)} with the command you recorded"


def _passable(models: Sequence[Merged], root: Path | None) -> list[str]:
    """The recorded models' files as a command run here takes them: relative to the working directory
    when under it (the path the program opened, resolved), else absolute; none for a model loaded
    from bytes that no project file matches."""
    here = Path.cwd()
    paths = []
    for merged in models:
        source = Path(merged.source) if merged.source else (root or here) / merged.meta.model
        if source.is_file():
            resolved = source.resolve()
            paths.append(os.path.relpath(resolved) if resolved.is_relative_to(here.resolve()) else str(resolved))
    return paths


def _judge_step(tail: str, tests: bool) -> str:
    """``check`` with the recorded command when it ran tests. A command that ran none (a demo, a
    workload script) would only have its exit status compared, a verdict that cannot fail while the
    command succeeds: name the tests instead, and ``--shadow``, which counts the command's answers."""
    if tests:
        return f"then `hatch-shrinkray check {tail}`"
    return "then `hatch-shrinkray check -- python -m pytest`: it ran no test (`check --shadow` counts its answers)"


def _relative(output: Path, root: Path | None) -> str:
    """``output`` relative to ``root`` (POSIX) when inside it, else as given."""
    if root is not None:
        with contextlib.suppress(ValueError):
            return output.resolve().relative_to(root.resolve()).as_posix() or "."
    return output.as_posix()


def _why_nothing(done: Finished, command: Sequence[str]) -> str:
    if done.booted == 0:
        if _frozen(command):
            return (f"{command[0]} is a frozen app (PyInstaller): its interpreter takes nothing from the environment, "
                    "so it cannot be recorded; record the unfrozen app (`python app.py ...`): same model bytes")
        if _isolated(command):
            return ("the command runs Python with -I or -E, which ignore PYTHONPATH, through which recording reaches "
                    "it: drop the flag")
        return ("no Python process of the command started with recording on (is it a Python program? interpreters "
                "started with -I or -E, and tools that clear the environment, such as tox or nox, ignore "
                "PYTHONPATH)")
    if not any(r.onnxruntime for r in done.reports) and not done.lost:
        return f"{done.booted} Python process(es) ran, and none imported onnxruntime"
    if not any(r.sessions for r in done.reports) and not done.lost:
        return "onnxruntime was imported, but no InferenceSession was created from a model file or bytes"
    if not any(r.calls for r in done.reports) and not done.lost:
        return ("sessions were created but run() was never called (run_with_iobinding and run_with_ort_values are "
                "not recorded)")
    return "the processes that ran models ended without writing what they recorded (the error lines say more)"


PYINSTALLER_COOKIE = b"MEI\x0c\x0b\x0a\x0b\x0e"
"""What ends every PyInstaller executable's archive (onedir and onefile alike)."""


def _frozen(command: Sequence[str]) -> bool:
    """Whether the program ``command`` runs is a PyInstaller app: its bootloader starts Python isolated
    (no site, no PYTHONPATH), so no recorder can be injected from outside."""
    program = shutil.which(command[0]) if command else None
    if program is None:
        return False
    try:
        with open(program, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 65536))
            return PYINSTALLER_COOKIE in fh.read()
    except OSError:
        return False


def _isolated(command: Sequence[str]) -> bool:
    """Whether ``command`` is a Python interpreter given -I or -E (alone or among other short flags)."""
    if not command or not Path(command[0]).name.startswith("python"):
        return False
    for arg in command[1:]:
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return False
        flags = arg[1:]
        for _k, flag in enumerate(flags):
            if flag in "IE":
                return True
            if flag in "cmWX":  # takes an argument: the rest of the command is not our business
                return False
    return False
