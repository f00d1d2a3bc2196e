"""Every key of the hook's table, declared once: each engine option's key, flag, field, TOML type,
default, meaning and check (:data:`OPTIONS`), and the hook's own keys (:data:`HOOK_KEYS`).

The hook's table is read and checked from these (:mod:`hatch_shrinkray.shipping.config`), the
commands' flags are made from :data:`OPTIONS` (``hatch_shrinkray.cli``), and so are the docs'
references (``docs/hooks.py``) and the flags that hints name (:data:`hatch_shrinkray.hints.FLAGS`).
Adding an option is one :class:`Option` here, its field in :mod:`hatch_shrinkray.options`, and its use.

Checks are pure and collect every problem, each naming the option as the user spelled it (a full
TOML key or a flag), so the user fixes every mistake in one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatch_shrinkray import options
from hatch_shrinkray.errors import ShrinkrayError, did_you_mean
from hatch_shrinkray.method_facts import facts, having
from hatch_shrinkray.sizes import TARGETS

Check = Callable[[Any, options.ShrinkOptions, str], list[str]]
"""The problems with an option's value (``value``, all the options, the option's name as spelled)."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _one_of(choices: tuple[Any, ...]) -> Check:
    def check(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
        if (_is_int(value) or not isinstance(choices[0], int)) and value in choices:
            return []
        close = did_you_mean(value, choices) if isinstance(value, str) and isinstance(choices[0], str) else None
        return [f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}"
                + (f" (did you mean {close!r}?)" if close else "")]
    return check


def _positive(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    return [] if _is_int(value) and value >= 1 else [f"{name} must be a positive integer; got {value!r}"]


def _positive_or_unset(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    return [] if value is None else _positive(value, opts, name)


def _non_negative(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    return [] if _is_int(value) and value >= 0 else [f"{name} must be a non-negative integer; got {value!r}"]


def _between(lo: float, hi: float, *, optional: bool = False) -> Check:
    """A number in ``[lo, hi]``: the tolerances and ``auto``'s budgets lie in [0, 1] (a rel-L2 above 1
    would pass a model whose outputs are all zero, a cosine of 0 or below one whose outputs are
    unrelated; NaN passes nothing); only ``budget-load`` may be ``inf`` (size first)."""
    def check(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
        if (optional and value is None) or options.in_range(value, lo, hi):
            return []
        return [f"{name} must be a number from {lo} to {hi}; got {value!r}"]
    return check


def _levels(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    if value is None:
        return []
    low, high, _ = options.LEVELS.get(opts.method, options.ANY_LEVELS)
    if _is_int(value) and low <= value <= high:
        return []
    which = f" with method {opts.method}" if opts.method in options.LEVELS else ""
    plain = f" ({facts(opts.method).plain})" if facts(opts.method).plain else ""
    return [f"{name} must be an integer from {low} to {high}{which}{plain}; got {value!r}"]


def _runtimes(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    errors = []
    for entry in value:
        if isinstance(entry, str) and entry.strip() == "onnxruntime":
            errors.append(f"{name} entry 'onnxruntime' needs a version: the oldest release your users run, "
                          "like 'onnxruntime>=1.18'")
        elif not (isinstance(entry, str)
                  and (entry in options.NAMED_RUNTIMES or options.RUNTIME_FLOOR.match(entry.strip()))):
            errors.append(f"{name} entries must be 'web', 'openvino' or an onnxruntime version floor "
                          f"like 'onnxruntime>=1.18'; got {entry!r}")
    return errors


def _named(what: str, choices: tuple[str, ...], problem: Callable[[str], str] | None = None) -> Check:
    """A table of names (tensor patterns, outputs) to one of ``choices`` (``problem``: what is wrong
    with a value, in words, where the choices take more than a name)."""
    def check(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
        errors = []
        for key, choice in value:
            if not isinstance(key, str) or not key:
                errors.append(f"{name} has an empty {what}")
            if problem is not None:
                if wrong := problem(choice):
                    errors.append(f"{name}.{key} {wrong}")
            elif choice not in choices:
                errors.append(f"{name}.{key} must be one of {', '.join(choices)}; got {choice!r}")
        return errors
    return check


def _inputs(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    problem = None if value is None else options.inputs_problem(Path(value))
    return [f"{name} {problem}"] if problem else []


def _dims(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    return [f"{name} {dim!r} must be a positive integer; got {size!r}" for dim, size in value
            if not _is_int(size) or size < 1]


def _int_range(value: Any, opts: options.ShrinkOptions, name: str) -> list[str]:
    low, high = value
    if _is_int(low) and _is_int(high) and options.INT64[0] <= low < high <= options.INT64[1]:
        return []
    return [f"{name} must be two integers [low, high) with low < high, from {options.INT64[0]} to {options.INT64[1]}"]


@dataclass(frozen=True)
class Kind:
    """A TOML type: how the table's value is read, and how its flag takes it."""

    words: str
    """The type as the docs name it."""
    read: Callable[[Any, str, list[str]], Any]
    """The value converted for :func:`options_from`, or None after reporting a wrong type (``path``:
    the full TOML path)."""
    flag: Mapping[str, Any]
    """argparse's ``add_argument`` settings for the flag."""
    given: Callable[[Any, str], Any] = lambda value, spelling: value
    """The flag's parsed value as the table's value (``spelling``: the flag, for messages)."""


def _typed(test: Callable[[Any], bool], convert: Callable[[Any], Any],
           wrong: str) -> Callable[[Any, str, list[str]], Any]:
    def read(value: Any, path: str, errors: list[str]) -> Any:
        if test(value):
            return convert(value)
        errors.append(f"Field `{path}` {wrong}")
        return None
    return read


def read_strings(value: Any, path: str, errors: list[str]) -> tuple[str, ...] | None:
    """An array of strings (``path``: its full TOML path, for the message)."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    errors.append(f"Field `{path}` must be an array of strings")
    return None


def _read_dims(value: Any, path: str, errors: list[str]) -> tuple[tuple[str, int], ...] | None:
    """Symbolic dimension values; checked here in full because each entry has its own TOML path."""
    if not isinstance(value, dict):
        errors.append(f"Field `{path}` must be a table of integers")
        return None
    dims: list[tuple[str, int]] = []
    for name, size in value.items():
        if _is_int(size) and size >= 1:
            dims.append((str(name), size))
        else:
            errors.append(f"Field `{path}.{name}` must be a positive integer; got {size!r}")
    return tuple(dims)


def _pairs(shape: str, example: str) -> Callable[[Any, str], tuple[tuple[str, str], ...]]:
    """A repeatable ``A=B`` flag's items as ``(A, B)`` pairs (``B`` after the last ``=``)."""
    def given(items: Any, spelling: str) -> tuple[tuple[str, str], ...]:
        pairs = []
        for item in items:
            left, sep, right = item.rpartition("=")
            if not sep or not left:
                raise ShrinkrayError(f"{spelling} {item!r} must look like {shape} (e.g. {example!r})")
            pairs.append((left, right))
        return tuple(pairs)
    return given


def _given_dims(items: Any, spelling: str) -> tuple[tuple[str, int], ...]:
    dims = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ShrinkrayError(f"{spelling} {item!r} must look like NAME=VALUE with an integer value")
        dims.append((name, int(value)))
    return tuple(dims)


def _table_of(what: str, example: str) -> Callable[[Any, str, list[str]], Any]:
    return _typed(lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                  lambda v: tuple((str(k), x) for k, x in v.items()), f"must be a table of {what} (`{example}`)")


KINDS: dict[str, Kind] = {
    "string": Kind("string", _typed(lambda v: isinstance(v, str), str, "must be a string"), {}),
    "path": Kind("path", _typed(lambda v: isinstance(v, str) and bool(v), str, "must be a path relative to the "
                                "project root (a recording directory or a .npz file)"),
                 {"type": Path, "metavar": "PATH"}),
    "integer": Kind("integer", _typed(_is_int, int, "must be an integer"), {"type": int, "metavar": "N"}),
    "boolean": Kind("boolean", _typed(lambda v: isinstance(v, bool), bool, "must be a boolean"), {"nargs": 0}),
    "number": Kind("number", _typed(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), float,
                                    "must be a number"), {"type": float, "metavar": "NUMBER"}),
    "strings": Kind("array of strings", read_strings, {"append": True}, lambda v, s: tuple(v)),
    "dims": Kind("table of integers", _read_dims, {"append": True, "metavar": "NAME=VALUE"}, _given_dims),
    "range": Kind("array of two integers",
                  _typed(lambda v: isinstance(v, list) and len(v) == 2 and all(_is_int(x) for x in v), tuple,
                         "must be an array of two integers [low, high]"),
                  {"type": int, "nargs": 2, "metavar": ("LOW", "HIGH")}, lambda v, s: tuple(v)),
    "encodings": Kind("table of strings", _table_of("tensor-name patterns to encodings",
                                                    'encodings = { "conv1.weight" = "fp16" }'),
                      {"append": True, "metavar": "GLOB=ENCODING"}, _pairs("GLOB=ENCODING", "conv1.*=fp16")),
    "judges": Kind("table of strings", _table_of("output names to judges",
                                                 'judges = { "probability_map" = "map", "stateN" = "off" }'),
                   {"append": True, "metavar": "OUTPUT=JUDGE"}, _pairs("OUTPUT=JUDGE", "probability_map=map")),
}


GROUPS: dict[str, str] = {"encoding": "encoding", "tensors": "which tensors", "auto": "auto's budgets",
                          "target": "where it runs", "verification": "verification",
                          "generated": "generated inputs"}
"""The headings the options' flags are listed under in ``--help`` (an option's ``group``), in order."""


@dataclass(frozen=True)
class Only:
    """Where an option does something: with one of ``methods`` (empty: any), with real inputs
    (``inputs=True``) or generated ones (``False``). A verification option does nothing with
    verification off. A flag given where its option does nothing is refused (the user meant
    something that would not happen)."""

    methods: tuple[str, ...] = ()
    inputs: bool | None = None

    def idle(self, opts: options.ShrinkOptions, verify: bool, names: Mapping[str, str]) -> str | None:
        """Why the option does nothing with ``opts`` (``verify``: a verification option), in words
        that name the other options as ``names`` spells them; None when it does something."""
        if verify and opts.verify is None:
            return f"verification is off ({names.get('verify', 'verify')})"
        if self.methods and opts.method not in self.methods:
            return f"it applies to {_or(self.methods)} only, not {opts.method} ({names.get('method', 'method')})"
        inputs = opts.verify.inputs if opts.verify is not None else None
        if self.inputs is True and inputs is None:
            return f"it applies with real inputs only ({names.get('inputs', 'inputs')})"
        # a recording directory may lack a model, which is then verified on generated inputs
        if self.inputs is False and inputs is not None and Path(inputs).is_file():
            return f"it applies to generated inputs only, and {names.get('inputs', 'inputs')} gives real ones"
        return None


def _or(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


@dataclass(frozen=True)
class Option:
    """One engine option: a key of the hook's table (top level and overrides), mostly with a flag of
    ``shrink``, ``wheel`` and ``check`` (the verification ones on ``compare`` too)."""

    key: str
    """The TOML key, which the flag spells (``min-elements``, ``--min-elements``)."""
    kind: str
    """Its TOML type, a key of :data:`KINDS`."""
    help: str
    """What it means, for the configuration reference (markdown)."""
    flag_help: str | None
    """What the flag does, for ``--help`` (None: no flag, the key only)."""
    check: Check | None = None
    verify: bool = False
    """A field of :class:`VerifyOptions` (a verification flag, which ``compare`` takes too)."""
    flag: str = ""
    """The flag, when it does not spell the key (``--no-dedup``)."""
    const: bool | None = None
    """The value a boolean's flag sets."""
    metavar: str | None = None
    shown: str | None = None
    """The default as the docs show it, when the field's own does not say it."""
    group: str = "encoding"
    """The heading its flag is listed under in ``--help`` (a key of :data:`GROUPS`)."""
    common: bool = False
    """Its flag is one of the few ``-h`` shows (the rest are under ``--help``)."""
    only: Only = Only()
    """Where it does something (a flag given where it does nothing is refused)."""

    @property
    def field(self) -> str:
        """The options field it sets (``int_range``: ``int_low`` and ``int_high``)."""
        return self.key.replace("-", "_")

    @property
    def flags(self) -> tuple[str, ...]:
        """The flag; none for a key without a flag."""
        return () if self.flag_help is None else (self.flag or f"--{self.key}",)

    def default(self) -> Any:
        """The engine's default, its value in the default options (``int-range``: both ends; ``verify``: on)."""
        return self.value(options.ShrinkOptions())

    def value(self, opts: options.ShrinkOptions) -> Any:
        """Its value in ``opts`` (verification ones: None when verification is off)."""
        if not self.verify:
            return opts.verify is not None if self.key == "verify" else getattr(opts, self.field)
        if opts.verify is None:
            return None
        if self.key == "int-range":
            return (opts.verify.int_low, opts.verify.int_high)
        return getattr(opts.verify, self.field)


_BUDGET_DEFAULT = "round-to-nearest int8's"
_AUTO = Only(having("plan"))
_GENERATED = Only(inputs=False)
_RANGES = tuple(options.LEVELS.items())
"""Each method's ``levels``: lowest, highest, default (its facts), as the help and the docs show them."""


_BUDGET = _between(0.0, 1.0, optional=True)

OPTIONS: tuple[Option, ...] = (
    Option("method", "string",
           f"the encoding method: {_or(tuple(f'`{m}`' for m in options.METHODS))} "
           "([Methods and encodings](methods.md))",
           f"one of {', '.join(options.METHODS)} (default %(default)s)",
           _one_of(options.METHODS), group="encoding", common=True),
    Option("min-elements", "integer", "the smallest float tensor worth encoding; smaller ones stay float",
           "smallest tensor to encode (default %(default)s)", _positive, group="tensors"),
    Option("exclude-tensors", "strings", "keep tensors whose name matches one of these globs",
           "keep tensors whose name matches float (repeatable)", metavar="GLOB",
           group="tensors"),
    Option("exclude-ops", "strings", "keep tensors consumed by one of these op types",
           "keep tensors consumed by this op type float (repeatable)", metavar="OP",
           group="tensors"),
    Option("dedup", "boolean", "store identical tensors once first (lossless)",
           "do not merge identical tensors first", flag="--no-dedup", const=False, group="tensors"),
    Option("scheme", "string", "`int8`: `symmetric` or `asymmetric` grid",
           f"int8 scheme: {', '.join(options.SCHEMES)} (default %(default)s)", _one_of(options.SCHEMES),
           group="encoding"),
    Option("levels", "integer", "levels per channel, " + ", ".join(f"`{m}` {lo}..{hi}" for m, (lo, hi, _) in _RANGES)
           + ": fewer distinct codes in the same tensors (same decode and load cost, a smaller wheel and web download)",
           "levels per channel: " + ", ".join(f"{m} {lo}..{hi} (default {d})" for m, (lo, hi, d) in _RANGES)
           + "; fewer = a smaller download", _levels, shown=", ".join(f"`{d}` (`{m}`)" for m, (_, _, d) in _RANGES),
           only=Only(having("levels"))),
    Option("decode", "string", "`int8`: `float` (`Cast -> Mul`, folded at load) or `fast` (`DequantizeLinear` "
           "before MatMul, opset >= 13, int8 activations; kept only where the build's onnxruntime fuses it)",
           f"int8 decode: {', '.join(options.DECODES)} (fast = DequantizeLinear before MatMul, opset >= 13, int8 "
           "activations; kept only where onnxruntime fuses it; default %(default)s)", _one_of(options.DECODES)),
    Option("block-size", "integer", "`int4` block size: 16, 32, 64, 128 or 256",
           f"int4 block size: {', '.join(map(str, options.BLOCK_SIZES))} (default %(default)s)",
           _one_of(options.BLOCK_SIZES), only=Only(having("blocks"))),
    Option("budget-rel-l2", "number", "`auto`: the largest relative L2 of any output on the fitting samples (0 to "
           "1); unset: round-to-nearest int8's there, less half of what output-aware rounding wins (a margin), "
           "twice that where outputs carry answers",
           "auto: largest output relative L2 on the fitting inputs (default: round-to-nearest int8's there, less "
           "half of what output-aware rounding wins, twice that where the outputs carry answers)", _BUDGET,
           shown=_BUDGET_DEFAULT, group="auto", only=_AUTO),
    Option("budget-cosine", "number", "`auto`: the smallest cosine of any output (0 to 1); unset: relative to "
           "int8's, as `budget-rel-l2`",
           "auto: smallest output cosine (default: relative to round-to-nearest int8's, as --budget-rel-l2)", _BUDGET,
           shown=_BUDGET_DEFAULT, group="auto", only=_AUTO),
    Option("budget-agreement", "number", "`auto`: the smallest share of unchanged discrete answers (0 to 1); unset: "
           "at least round-to-nearest int8's, with a margin as `budget-rel-l2`", "auto: smallest share of "
           "unchanged discrete answers (default: at least round-to-nearest int8's on the same inputs, with a margin "
           "as --budget-rel-l2)", _BUDGET, shown=_BUDGET_DEFAULT, group="auto", only=_AUTO),
    Option("budget-load", "number", "`auto`: the most its decodes may cost to fold when a session is created, as a "
           "multiple of int8 of every weight (its rungs fold at most int8's)",
           "auto: the most its decodes may cost to fold at load, as a multiple of int8 of every weight (default "
           f"{options.LOAD_BUDGET}, {options.WEB_LOAD_BUDGET} where --runtimes names web; inf: size first)",
           _between(1.0, float("inf"), optional=True), shown="`1.25` (`1.0` with a `web` runtime)",
           group="auto", only=_AUTO),
    Option("encodings", "encodings", "per-tensor encodings whatever the method: `{ \"conv1.*\" = \"fp16\" }` (name "
           "globs; `float32`, `fp16`, `int16`, `int12`, `int10`, `int8`, `int6`, `int4`); two patterns that give "
           "one tensor different encodings are an error", "give tensors whose name matches this encoding whatever "
           f"the method (repeatable; {', '.join(options.ENCODINGS)})", _named("tensor pattern", options.ENCODINGS),
           group="tensors"),
    Option("runtimes", "strings", "where the shrunk model runs: `onnxruntime>=X.Y` (a floor; a bare `onnxruntime` "
           "is refused), `web`, `openvino`; methods those runtimes cannot load, or would decode on every inference, "
           "are refused ([Where the shrunk models run](runtimes.md))",
           "where the model will run: onnxruntime>=X.Y, web or openvino (repeatable); methods those runtimes "
           "cannot load, or would decode per inference, are refused", _runtimes,
           metavar="TARGET", shown="from `[project].dependencies`", group="target"),
    Option("target", "string", "the size that counts: `wheel` (the zip member, deflated as hatchling writes it), "
           "`web` (brotli quality 11; installs the `compress` extra), `disk` (the raw file) or `memory` (the "
           "weights in a running process: MatMul, Gemm and embedding weights stay packed where the `runtimes` "
           "have a kernel that reads them so, and the build measures memory in a fresh process; "
           "[Memory](memory.md)). A shrunk model ships only if it is smaller there (`memory`: in the wheel)",
           f"the size that counts: {', '.join(TARGETS)} (default %(default)s: the wheel's deflated member; "
           "web: brotli 11, needs the compress extra; disk: the raw file; memory: weights kept packed in a "
           "running process where onnxruntime reads them so)", _one_of(TARGETS),
           metavar="SIZE", group="target", common=True),
    Option("rounding", "string", "int8 codes (`int8`, `auto`) with real `inputs`: `output-aware` rounds them to keep "
           "the outputs on the recording, where that does no harm on units it was not fitted on; `nearest` always "
           "rounds to nearest, and the inputs only verify. Set `nearest` for a model when `hatch-shrinkray check` "
           "shows your tests judge its fitted codes worse ([Checking](checking.md))",
           f"int8 codes with real inputs: {', '.join(options.ROUNDINGS)} (default %(default)s: fitted to the inputs "
           "where that does no harm on units it was not fitted on; nearest: the inputs only verify)",
           _one_of(options.ROUNDINGS), metavar="HOW", shown="`\"output-aware\"`",
           only=Only(having("fits_rounding"), inputs=True)),
    Option("strict", "boolean", "fail the build for a model that generated inputs cannot verify (the shrunk model "
           "fails on them, the original's outputs carry no signal there, or it does not run on them) instead of "
           "shipping its original with the `hatch-shrinkray record` command that lets the next build shrink it; "
           "real recorded inputs that fail always fail it ([Troubleshooting](troubleshooting.md))",
           "fail for a model that generated inputs cannot verify, instead of keeping its original", const=True,
           group="verification", common=True),
    Option("verify", "boolean", "compare the shrunk model's outputs with the original's; `false` turns verification "
           "off", "skip output verification (not recommended)", flag="--no-verify", const=False, shown="`true`",
           group="verification"),
    Option("max-rel-l2", "number", "verification: the largest relative L2 an output may show between the shrunk "
           f"model and the original (0 to 1). Set, it gates every output; unset ({options.DEFAULT_MAX_REL_L2}), it "
           "does not count for an output whose judge compared its answers and found every one held (`-v` says "
           "`not counted`)",
           "the largest relative L2 of any output, 0 to 1; set, it gates every output (default "
           f"{options.DEFAULT_MAX_REL_L2}, not counted where every answer held)", _between(0.0, 1.0, optional=True),
           verify=True, shown=f"`{options.DEFAULT_MAX_REL_L2}`", group="verification"),
    Option("min-cosine", "number", "verification: the smallest cosine similarity an output may show (0 to 1); set "
           f"or unset ({options.DEFAULT_MIN_COSINE}) as `max-rel-l2`",
           "the smallest cosine of any output, 0 to 1; set, it gates every output (default "
           f"{options.DEFAULT_MIN_COSINE}, not counted where every answer held)", _between(0.0, 1.0, optional=True),
           verify=True, shown=f"`{options.DEFAULT_MIN_COSINE}`", group="verification"),
    Option("min-agreement", "number", "verification: the smallest observed share of unchanged decisions of any "
           "output (labels, characters, pixels, frames; flips where the original was nearly tied aside), 0 to 1; it "
           "always gates. Whole answers (tests, texts, streams) are judged against round-to-nearest int8's count "
           "instead ([How sure](evidence.md))", "the smallest observed share of unchanged decisions (labels, "
           f"characters, pixels, frames), 0 to 1 (default {options.DEFAULT_MIN_AGREEMENT})",
           _between(0.0, 1.0, optional=True), verify=True, shown=f"`{options.DEFAULT_MIN_AGREEMENT}`",
           group="verification"),
    Option("inputs", "path", "real sample inputs, relative to the project: a recording directory (`hatch-shrinkray "
           "record`; each model finds its own file by sha256), a recording file, or a `.npz` with one array per "
           "graph input ([Recording real inputs](recording.md))", "real sample inputs: a recording directory, a "
           "recording file or a .npz (hatch-shrinkray record writes the first; a .npz holds one array per graph "
           "input); without it, generated inputs (a smoke check only)", _inputs, verify=True,
           shown="none: generated inputs", group="verification", common=True),
    Option("dims", "dims", "generated inputs only: values for symbolic dimensions, `{ batch = 1, seq = 128 }`",
           "generated inputs: value for a symbolic dimension (repeatable)", _dims, verify=True,
           group="generated", only=_GENERATED),
    Option("default-dim", "integer", "generated inputs only: the value of other symbolic dimensions (1 for a batch "
           "axis, a name that leads some input, else the larger of 32 and the input's largest fixed dimension; a "
           "name gets one size in every input; when the model does not run on those, 16000 and 512 for the last axis "
           "of a waveform-like input, then 224, 16 and 1 are tried, for the batch last); the verification line names "
           "the sizes used, `(batch=1, seq=32)`",
           "generated inputs: value for other symbolic dimensions (default: 1 for a batch axis, a name that leads "
           "some input, else max(32, the input's largest fixed dimension); the verification line names the sizes "
           "used)", _positive_or_unset, verify=True, shown="plausible", group="generated", only=_GENERATED),
    Option("int-range", "range", "generated inputs only: the range `[low, high)` of integer inputs",
           "range of generated integer inputs, [LOW, HIGH) (default %(default)s)", _int_range, verify=True,
           shown="`[0, 64]`", group="generated", only=_GENERATED),
    Option("samples", "integer", "generated inputs only: how many samples", "generated samples (default %(default)s)",
           _positive, verify=True, group="generated", only=_GENERATED),
    Option("seed", "integer", "generated inputs only: the random seed (0 or more)", None, _non_negative,
           verify=True, group="generated", only=_GENERATED),
    Option("judges", "judges", "how an output's answers are compared, instead of the judge its shape implies: "
           "`{ \"probability_map\" = \"map\", \"stateN\" = \"off\" }`; a judge's tolerance, what still counts as the "
           f"same answer, after a colon: `\"logits\" = \"segments:2\"` ({', '.join(options.TOLERANCES)}; "
           "[How sure](evidence.md))",
           "how an output's answers are compared, instead of the judge its shape implies (repeatable; "
           f"{', '.join(options.JUDGES)}; off: not judged; JUDGE:N sets its tolerance, logits=segments:2)",
           _named("output name", options.JUDGES, options.judge_problem), verify=True,
           group="verification"),
)
"""Every engine option, in the order of the docs' reference and of the checks."""

@dataclass(frozen=True)
class HookKey:
    """One key the hook reads itself (``shipping.config.HookConfig``), not an engine option, in the hook's table
    only (``models`` in every override too): its TOML type as the docs name it (``words``), its meaning (``help``,
    markdown), its default as the docs show it (``shown``; None: the ``HookConfig`` field's own) and the values a
    string key takes (``choices``; none: it is read by a function of its own)."""

    key: str
    words: str
    help: str
    shown: str | None = None
    choices: tuple[str, ...] = ()


HOOK_KEYS: tuple[HookKey, ...] = (
    HookKey("models", "array of strings", "glob patterns of the models to ship shrunk, relative to the project root "
            "(`**` allowed); a pattern that matches nothing is an error. For `hatch-shrinkray wheel` they match "
            "paths inside the wheel", "required"),
    HookKey("sdist", "string", "hook only: `original` ships the original models in the sdist (the wheel is still "
            "shrunk)", choices=("shrunk", "original")),
    HookKey("cache", "boolean or path", "cache shrunk models in the user cache directory; a string names the "
            "directory (`HATCH_SHRINKRAY_CACHE_DIR` overrides the default); `false` disables it. The directory "
            "must be private ([Trust and security](trust.md))"),
    HookKey("overrides", "array of tables", "an array of tables, each with its own `models` globs and any engine "
            "key, applied to the models it selects, in order", "`[]`"),
    HookKey("plan", "path or false", "the plan file `hatch-shrinkray check --fix` and `hatch-shrinkray check "
            "--search` write; `false` ignores it ([Checking with your own tests](checking.md))",
            "`\"shrinkray-plan.json\"` if present"),
    HookKey("pins", "string", "where the package's own text files (`.py`, `.yaml`, `.json`, `.txt`, ...) hold the "
            "sha256, sha1 or md5 of an original model it ships shrunk (a digest check before loading): `warn` names "
            "each such file and the digest it needs; `rewrite` ships those files with the shrunk model's digest "
            "instead (the hook ships a rewritten copy and never edits the project; `hatch-shrinkray wheel` "
            "rewrites the wheel's member and its RECORD) ([Checking with your own tests](checking.md))",
            choices=("warn", "rewrite")),
)
"""The hook's own keys, in the order of the docs' reference (after ``models``, the engine keys')."""

BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
HOOK_BY_KEY: dict[str, HookKey] = {k.key: k for k in HOOK_KEYS}
BY_FIELD: dict[str, Option] = {o.field: o for o in OPTIONS}


def option_errors(opts: options.ShrinkOptions, names: Mapping[str, str] | None = None) -> list[str]:
    """Every problem with ``opts``, each naming the option as the caller spells it.

    ``names`` maps field names (``min_elements``) to the user's spelling
    (``tool.hatch.build.hooks.shrinkray.min-elements`` or ``--min-elements``).
    """
    names = names or {}
    errors: list[str] = []
    for option in OPTIONS:
        value = option.value(opts)
        if option.check is not None and not (option.verify and opts.verify is None):
            errors += option.check(value, opts, names.get(option.field, option.field))
    plan = names.get("plan", "plan")
    errors += [f"{plan}: tensor {name!r} has encoding {encoding!r}, not one of {', '.join(options.ENCODINGS)}"
               for _, name, encoding in opts.plan if encoding not in options.ENCODINGS]
    return errors


def idle_options(keys: Iterable[str], per_model: Sequence[options.ShrinkOptions],
                 names: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(name, why)`` for each option among ``keys`` (the ones a user gave) that does nothing for
    any of ``per_model`` (the options each model gets), spelled as ``names`` spells them (field ->
    spelling). None when there is no model to judge by."""
    idle = []
    for key in keys:
        option = BY_KEY[key]
        reasons = [option.only.idle(opts, option.verify, names) for opts in per_model]
        if per_model and all(reasons):
            idle.append((names.get(option.field, key), str(reasons[0])))
    return idle


def options_from(settings: Mapping[str, Any], root: Path) -> options.ShrinkOptions:
    """Engine options from read settings (by key); unset keys keep the engine defaults, and
    ``inputs`` is relative to ``root``."""
    shrink = {o.field: settings[o.key] for o in OPTIONS if not o.verify and o.key != "verify" and o.key in settings}
    if settings.get("verify", True) is False:
        return options.ShrinkOptions(**shrink, verify=None)
    verify = {o.field: settings[o.key] for o in OPTIONS if o.verify and o.key in settings}
    if "int_range" in verify:
        verify["int_low"], verify["int_high"] = verify.pop("int_range")
    if "inputs" in verify:
        verify["inputs"] = root / verify["inputs"]
    return options.ShrinkOptions(**shrink, verify=options.VerifyOptions(**verify))


def read_settings(raw: Mapping[str, Any], table: str, errors: list[str]) -> dict[str, Any]:
    """The values of the option keys present in ``raw`` (a table at TOML path ``table``), by key,
    type-checked. A value of the wrong type is reported and left out, so the option falls back to
    its default and the value checks that follow do not report the same key twice."""
    settings: dict[str, Any] = {}
    for option in OPTIONS:
        if option.key in raw:
            value = KINDS[option.kind].read(raw[option.key], f"{table}.{option.key}", errors)
            if value is not None:
                settings[option.key] = value
    return settings

