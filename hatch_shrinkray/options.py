"""Engine options: frozen dataclasses, the values they may take, and what an ``inputs`` path must be.

Field names are the Python spelling; each is declared once as a key and a flag, with its check, in
:mod:`hatch_shrinkray.option_table`, which names every error the way the user spelled the option.
"""

from __future__ import annotations

import fnmatch
import re
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar

from hatch_shrinkray.codec import OMIT, one_of
from hatch_shrinkray.files import file_kind
from hatch_shrinkray.method_facts import FACTS, facts
from hatch_shrinkray.sizes import DEFAULT_TARGET, TARGETS

METHODS = tuple(FACTS)
ENCODINGS = ("float32", "fp16", "int16", "int12", "int10", "int8", "int6", "int4")
"""What ``encodings`` (and a plan) may set one tensor to, largest first: kept, float16, or symmetric
per-channel integer codes (int8 as method int8 writes them; the other widths round to nearest)."""
SCHEMES = ("symmetric", "asymmetric")
DECODES = ("float", "fast")
ROUNDINGS = ("output-aware", "nearest")
"""``rounding``: int8 codes fitted to the recorded inputs (kept only where they do no harm), or always
round-to-nearest (the recording then only verifies)."""
NAMED_RUNTIMES = ("web", "openvino")
BLOCK_SIZES = (16, 32, 64, 128, 256)
"""``block-size`` (int4): the block sizes onnxruntime's MatMulNBits quantizer supports."""
LEVELS = {name: f.levels for name, f in FACTS.items() if f.levels is not None}
"""``levels`` per method: lowest, highest, default. int8's 255 is plain int8 (codes -127..127);
fewer levels are fewer distinct codes in the same int8 container (smaller once compressed)."""
ANY_LEVELS = (2, 65536, 256)
"""Methods without levels check only that the value could belong to one (an override may switch
the method of some models while the table's ``levels`` stays)."""
JUDGES = ("auto", "map", "sequence", "tags", "boxes", "top-1", "decision", "segments", "equal", "values", "off")
"""What ``judges`` may set an output's judge to (``verification.judges``; ``auto``: detected)."""
TOLERANCES: dict[str, tuple[str, float, float]] = {
    "segments": ("steps", 0, 1e9), "sequence": ("edits", 0, 1e9), "tags": ("tags", 0, 1e9),
    "top-1": ("share", 0.0, 1.0), "decision": ("margin", 0.0, 0.5), "map": ("IoU", 0.0, 1.0),
    "boxes": ("IoU", 0.0, 1.0)}
"""The judges whose notion of "the same answer" a ``judges`` value may set after a colon
(``"segments:2"``): what the number counts (whole steps or frames, character edits per line, tags
per text; a share of the scores' range, a distance from the threshold, an IoU) and its range. A
tolerance belongs to the judge that reads it, so it is written with the judge's name: a number alone
could be read by whichever judge detection picks."""


def judge_spec(value: str) -> tuple[str, float | None]:
    """``"segments:2"`` -> ``("segments", 2.0)``; ``"map"`` -> ``("map", None)``; a tolerance that is
    no number -> ``(value, None)``, which no judge is named (the option's check says so)."""
    name, sep, tolerance = value.partition(":")
    if not sep:
        return value, None
    try:
        return name, float(tolerance)
    except ValueError:
        return value, None


def judge_problem(value: str) -> str:
    """What is wrong with a ``judges`` value, in words (empty: nothing)."""
    name, tolerance = judge_spec(value)
    if name not in JUDGES:
        head = value.partition(":")[0]
        if head in TOLERANCES:
            return f"has a tolerance that is no number: {value!r}"
        return f"must be one of {', '.join(JUDGES)} (with a tolerance after a colon for " \
               f"{', '.join(TOLERANCES)}: \"segments:2\"); got {value!r}"
    if tolerance is None:
        return ""
    if name not in TOLERANCES:
        return f"names {name!r}, which takes no tolerance; got {value!r}"
    unit, low, high = TOLERANCES[name]
    whole = unit in ("steps", "edits", "tags")
    if not low <= tolerance <= high or (whole and tolerance != int(tolerance)):
        what = "a whole number of " + unit if whole else f"a number from {low:g} to {high:g}"
        return f"tolerance of {name!r} must be {what}; got {value!r}"
    return ""
RUNTIME_FLOOR = re.compile(r"^onnxruntime\s*(>=|==|~=|>)\s*([0-9]+(?:\.[0-9]+)*)$")
"""A runtime target: ``onnxruntime`` with a lower bound, or one of ``NAMED_RUNTIMES``. A bare
``onnxruntime`` is refused: which methods load depends on the release, so a target names one."""
OLDEST_ONNXRUNTIME = "1.16.3"
"""The oldest onnxruntime the compatibility matrix tests: the target a project gets when its
dependencies name onnxruntime without a lower bound (its users may run any release)."""


DEFAULT_MAX_REL_L2 = 0.1
DEFAULT_MIN_COSINE = 0.995
DEFAULT_MIN_AGREEMENT = 0.95
"""Verification's limits where the user set none (``VerifyOptions``)."""

INT64 = (-(2**63), 2**63)
"""Where ``int-range`` may lie: generated integers are at most int64."""


@dataclass(frozen=True)
class VerifyOptions:
    """How the shrunk model is checked against the original with onnxruntime."""

    inputs: Path | None = None
    """Real sample inputs: a recording directory (``hatch-shrinkray record``; each model finds its own
    file by sha256), one recording file, or a ``.npz`` with one array per graph input (optionally with
    a leading sample axis). Generated from the signature when absent (a smoke check only)."""
    dims: tuple[tuple[str, int], ...] = ()
    """Generated inputs: values for symbolic dimensions, by name."""
    default_dim: int | None = None
    """Generated inputs: the value of other symbolic dimensions; ``None``: 1 for a batch axis (a name
    that leads some input), else the larger of 32 and the input's largest fixed dimension."""
    int_low: int = 0
    int_high: int = 64
    samples: int = 8
    seed: int = 0
    max_rel_l2: float | None = None
    """The largest relative L2 of any output. None: ``DEFAULT_MAX_REL_L2``, which an output whose judge
    compared its answers and found every one held does not count; a value the user set always gates."""
    min_cosine: float | None = None
    """The smallest cosine of any output; None: ``DEFAULT_MIN_COSINE``, counted as ``max_rel_l2``."""
    min_agreement: float | None = None
    """The smallest observed share of unchanged decisions (labels, characters, pixels, frames; near ties
    aside) of any output; None: ``DEFAULT_MIN_AGREEMENT``. It always gates."""
    judges: tuple[tuple[str, str], ...] = ()
    """``(output name, judge)``: how an output's answers are compared (``verification.judges``),
    instead of the judge its shape and values imply; ``off`` leaves the output unjudged. A judge may
    carry its tolerance after a colon (``segments:2``, ``auto`` excepted: see ``TOLERANCES``)."""

    def dim_map(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def rel_l2_limit(self) -> float:
        return DEFAULT_MAX_REL_L2 if self.max_rel_l2 is None else self.max_rel_l2

    @property
    def cosine_limit(self) -> float:
        return DEFAULT_MIN_COSINE if self.min_cosine is None else self.min_cosine

    @property
    def agreement_limit(self) -> float:
        return DEFAULT_MIN_AGREEMENT if self.min_agreement is None else self.min_agreement

    def judge_of(self, output: str) -> str:
        return dict(self.judges).get(output, "auto")


LOAD_BUDGET = 1.25
"""``budget-load`` by default: the project's bar for older runtimes caps every method's load at a
multiple of int8's (docs/runtimes.md), and load time grows with the bytes folded, so the default
stays below that bar."""
WEB_LOAD_BUDGET = 1.0
"""``budget-load`` by default with a ``web`` target: onnxruntime-web folds in wasm, where folding a
long chain costs far more load time than natively, even on a warmed page, so the web default is
stricter."""


@dataclass(frozen=True)
class ShrinkOptions:
    """What to shrink and how. ``verify=None`` switches verification off (explicit opt-out)."""

    method: str = "int8"
    min_elements: int = 16384
    exclude_tensors: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    dedup: bool = True
    scheme: str = "symmetric"
    levels: int | None = None
    """Levels per channel: ``int8`` 3..255 (default 255, plain int8), ``float-levels`` 2..65536
    (default 256). None: the method's default (``level_count``)."""
    decode: str = "float"
    block_size: int = 32
    verify: VerifyOptions | None = field(default_factory=VerifyOptions)
    budget_rel_l2: float | None = None
    """``auto``: largest relative L2 of any output allowed on the fitting inputs. None (the default):
    relative to round-to-nearest int8 on the same inputs (``auto.budget.Limits``)."""
    budget_cosine: float | None = None
    """``auto``: smallest cosine similarity of any output allowed (None: relative to int8's)."""
    budget_agreement: float | None = None
    """``auto``: smallest share of unchanged discrete answers (per-position argmax of class scores,
    ``> 0.5`` decisions of probability outputs). None: at least round-to-nearest int8's."""
    budget_load: float | None = None
    """``auto``: the most its decodes may cost onnxruntime to fold when a session is created, as a
    multiple of every weight at int8 (bytes the folding writes). Packed 4/6/10/12-bit codes cost
    about twice int8's; ``inf`` trades load time for size freely. None: ``LOAD_BUDGET`` (1.25), or
    ``WEB_LOAD_BUDGET`` (1.0) when ``runtimes`` names ``web``, where folding runs in wasm."""
    runtimes: tuple[str, ...] = ()
    """Where the shrunk model will run (``onnxruntime>=1.18``, ``web``, ``openvino``): methods those
    runtimes cannot load or would decode per inference are refused. Empty: no target declared."""
    encodings: tuple[tuple[str, str], ...] = ()
    """``(tensor-name glob, encoding)``: these tensors get that encoding whatever the method; a tensor
    that several patterns match with different encodings is an error."""
    plan: tuple[tuple[str, str, str], ...] = ()
    """``(scope, tensor name, encoding)``, exact: the per-tensor plan ``hatch-shrinkray check --search``
    found for this very model (``shipping.plan``); it takes precedence over ``encodings``."""
    rounding: str = "output-aware"
    """``output-aware``: with real inputs, int8 codes (``int8``, ``auto``'s rungs) are rounded to keep
    the model's outputs, where the do-no-harm guard keeps that; ``nearest``: always round-to-nearest,
    the inputs only verify (a package's own tests may judge a fitted model worse than held-out data
    does: ``hatch-shrinkray check`` says which)."""
    strict: bool = False
    """A model that generated inputs cannot verify (the shrunk model fails on them, the original's
    outputs carry no signal there, or it does not run on them) fails instead of shipping its
    original: for CI that wants every model shrunk."""
    target: str = DEFAULT_TARGET
    """The size that counts (``sizes``): ``wheel`` (the zip member, deflate level 6), ``web`` (brotli
    quality 11) or ``disk`` (raw). The never-larger rule and the methods' size choices use it."""

    def level_count(self) -> int:
        """``levels``, or the method's default when unset."""
        return self.levels if self.levels is not None else LEVELS.get(self.method, ANY_LEVELS)[2]

    def label(self) -> str:
        """The method as messages name it: ``int8 with 15 levels`` when the levels are not its default."""
        if self.method in LEVELS and self.level_count() != LEVELS[self.method][2]:
            return f"{self.method} with {self.level_count()} levels"
        return self.method

    def describe(self) -> dict[str, Any]:
        """A JSON-ready dict of the options that affect the output (for manifests and cache keys)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, VerifyOptions):
                value = {g.name: _jsonable(getattr(value, g.name)) for g in fields(value)}
            out[f.name] = _jsonable(value)
        out["levels"] = self.level_count()
        return out


def chosen_encoding(scope: str, name: str, options: ShrinkOptions) -> str | None:
    """The encoding ``plan`` or ``encodings`` set for this tensor, or None (the method decides).

    Raises ``ValueError`` naming the patterns when ``encodings`` contradicts itself for the tensor."""
    for s, n, encoding in options.plan:
        if s == scope and n == name:
            return encoding
    hits = {(p, e) for p, e in options.encodings if fnmatch.fnmatchcase(name, p)}
    if len({e for _, e in hits}) > 1:
        listed = ", ".join(f"{p!r} = {e!r}" for p, e in sorted(hits))
        raise ValueError(f"tensor {name!r} matches encodings with different encodings: {listed}")
    return next(iter(hits))[1] if hits else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


INPUTS_MAX_FILE_BYTES = 2_000_000_000
"""Largest sample file read: a sample file holds at most 1 GB of arrays once loaded
(``recording.npz``), so a bigger one is refused before it is hashed or read."""


def inputs_problem(path: Path) -> str | None:
    """Why ``inputs`` cannot be read as samples: only a regular file, or a directory whose ``.npz``
    files are regular files, each of a bounded size (a FIFO or ``/dev/zero`` would hang the
    build, which hashes them for the cache key, or exhaust its memory)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return f"names a file or directory that does not exist: {path}"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}): {path}"
    if stat.S_ISDIR(info.st_mode):
        for member in sorted(path.glob("*.npz")):
            problem = _sample_file_problem(member)
            if problem:
                return f"holds {member.name}, which {problem}; a recording directory holds regular .npz files: {path}"
        return None
    problem = _sample_file_problem(path)
    return None if problem is None else f"names a file that {problem}; point it at a .npz file or a recording " \
        f"directory: {path}"


def _sample_file_problem(path: Path) -> str | None:
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {file_kind(info.st_mode)}, not a regular file"
    if info.st_size > INPUTS_MAX_FILE_BYTES:
        return f"is {info.st_size / 1e9:.1f} GB, over the {INPUTS_MAX_FILE_BYTES / 1e9:.0f} GB a sample file may take"
    return None


def in_range(value: object, lo: float, hi: float) -> bool:
    """A real number (not a bool) within [lo, hi]; NaN never is, and inf only where ``hi`` is inf."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and lo <= value <= hi


@dataclass(frozen=True)
class Remedy:
    """A choice above the configured one, on the ladder a model falls back along (``registry.ladder``):
    option values (``rounding``, ``method``, ``target``: ``wheel`` where target ``memory`` kept weights
    packed), or the original bytes. ``check --fix`` records the one the package's tests accepted in the
    plan file; a build falls back along the same ladder when a choice fails its limits on the recording."""

    method: Annotated[str, one_of(METHODS)] | None = field(default=None, metadata=OMIT)
    rounding: Annotated[str, one_of(ROUNDINGS)] | None = field(default=None, metadata=OMIT)
    original: bool = field(default=False, metadata=OMIT)
    target: Annotated[str, one_of(TARGETS)] | None = field(default=None, metadata=OMIT)
    json_closed: ClassVar[bool] = True
    """A key this version does not know is a choice it cannot make: the plan is refused, not half applied."""

    def apply(self, options: ShrinkOptions) -> ShrinkOptions:
        """``options`` with this choice; a method named here takes its own default levels."""
        return replace(options, method=self.method or options.method, rounding=self.rounding or options.rounding,
                       levels=None if self.method else options.levels, target=self.target or options.target)

    def describe(self, options: ShrinkOptions, tensors: Sequence[tuple[str, str, str]] = ()) -> str:
        """The choice for people, on ``options`` as configured: ``int8 round-to-nearest``, ``fp16``,
        ``int8 round-to-nearest, 3 tensors wider (2 int10, 1 fp16)`` with a per-tensor plan."""
        if self.original:
            return "the original"
        chosen = self.apply(options)
        rounding = " round-to-nearest" if chosen.rounding == "nearest" and facts(chosen.method).fits_rounding else ""
        if options.target == "memory" and chosen.target != "memory":
            rounding += ", float in memory"
        if not tensors:
            return f"{chosen.method}{rounding}"
        counts = Counter(e for _, _, e in tensors)
        wider = ", ".join(f"{counts[e]} {e}" for e in reversed(ENCODINGS) if counts[e])
        return f"{chosen.method}{rounding}, {len(tensors)} tensor{'s' if len(tensors) > 1 else ''} wider ({wider})"
