"""The hook's TOML table, checked by one pure function into a frozen :class:`HookConfig`.

Every problem is collected before anything is raised, so a user fixes all mistakes in one round
trip, and every message names the full TOML path in hatchling's own wording ("Field `...` must be
a table") so the build speaks with one voice. Every key is declared in
:mod:`hatch_shrinkray.option_table` (the engine options, whose checks the CLI uses too, and the
hook's own keys); this module checks the keys, globs and the hook's own settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from hatch_shrinkray.errors import ShrinkrayError, did_you_mean
from hatch_shrinkray.files import model_files
from hatch_shrinkray.hints import LINE_LIMIT, counted, listed
from hatch_shrinkray.option_table import HOOK_KEYS, OPTIONS, option_errors, options_from, read_settings, read_strings
from hatch_shrinkray.options import OLDEST_ONNXRUNTIME, ShrinkOptions
from hatch_shrinkray.shipping.advice import default_recording, record_command
from hatch_shrinkray.shipping.layout import Layout, project_layout
from hatch_shrinkray.shipping.plan import PLAN_NAME, PlanEntry, read_plan

PLUGIN_NAME = "shrinkray"

RESERVED_KEYS = ("dependencies", "require-runtime-dependencies", "require-runtime-features",
                 "enable-by-default")
"""Keys hatchling itself reads from every hook table; they are accepted and left to hatchling."""

ONNXRUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino")

ENGINE_KEYS: dict[str, str] = {o.key: o.field for o in OPTIONS}
"""TOML key -> the field name :func:`option_errors` uses; allowed at top level and in overrides."""

_HOOK_KEYS = tuple(k.key for k in HOOK_KEYS)

class NoMatch(str):
    """The error of a ``models`` pattern that matches no file, with the ``pattern`` as data (a
    caller that knows where else the files are, ``check`` in an installed package, reads it)."""

    pattern: str

    def __new__(cls, path: str, pattern: str, where: str = "", models: Sequence[str] = ()) -> NoMatch:
        """``models``: the model files that exist ``where`` (the wheel, the project), listed on a line
        of their own: the pattern's mistake is usually a directory level."""
        text = f"Field `{path}` pattern `{pattern}` matches no file"
        if where:
            head = f"  {where}'s models: "
            room = LINE_LIMIT - counted(head)
            text += f"\n{head}{listed(models, room)}" if models else f"; {where} holds no .onnx file"
        error = super().__new__(cls, text)
        error.pattern = pattern
        return error


class ConfigurationError(ShrinkrayError):
    """The table has one or more problems; ``errors`` lists every one of them, and ``unmatched`` the
    ``models`` patterns among them that match no file."""

    def __init__(self, errors: list[str], table: str | None = None) -> None:
        self.errors = list(errors)
        self.table = table
        self.unmatched = tuple(e.pattern for e in errors if isinstance(e, NoMatch))
        heading = (f"Invalid configuration in `{table}`:" if table is not None and not table.startswith("tool.hatch.")
                   else "Invalid configuration for build hook `shrinkray`:")
        super().__init__("\n".join([heading, *(f"- {e}" for e in self.errors)]))


@dataclass(frozen=True)
class ModelEntry:
    """One model file the hook will ship, with the engine options that apply to it."""

    relpath: str
    """POSIX path relative to the project root: the manifest key and the force-include target."""
    options: ShrinkOptions
    names: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Option field -> how the user wrote it (``tool.hatch.build.hooks.shrinkray.samples``, the
    override's table when one set it, or ``--samples``), for messages about this model."""


@dataclass(frozen=True)
class CommandLine:
    """What a command's flags say: each given flag overrides its key of the table (of every model,
    overrides included); ``models`` globs, when given, replace the table's ``models``."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    """TOML key -> value, typed as the table's values are read (``inputs``: an absolute path)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """TOML key -> the flag that set it (``--method``), for messages."""
    models: tuple[str, ...] = ()
    models_flag: str = "--models"
    pins: str | None = None
    """``--pins``, which overrides the table's ``pins`` (None: not given)."""
    plan: Path | None = None
    """``--plan``, the plan file read instead of the table's ``plan`` (None: not given)."""


@dataclass(frozen=True)
class HookConfig:
    table: str
    """The TOML path of the table this came from, for messages."""
    target: str
    models: tuple[ModelEntry, ...]
    sdist: str = "shrunk"
    cache: bool = True
    cache_dir: Path | None = None
    """An explicit cache directory from ``cache = "dir"``; ``None`` means the user cache dir."""
    plan_file: Path | None = None
    """The plan file (``plan``, by default ``shrinkray-plan.json`` when the project has one)."""
    plans: Mapping[str, PlanEntry] = field(default_factory=dict)
    """Its entries by the sha256 of the original model each was found for."""
    pins: str = "warn"
    """``warn`` names each file that pins an original model's digest; ``rewrite`` ships a copy of it that
    names the shrunk model's (:mod:`hatch_shrinkray.shipping.pins`)."""

    @property
    def ships_originals(self) -> bool:
        """An sdist with ``sdist = "original"`` carries the untouched models and no manifest."""
        return self.target == "sdist" and self.sdist == "original"


def recording_paths(config: HookConfig, root: Path) -> list[str]:
    """The ``inputs`` paths of the configured models that lie inside the project, relative to ``root``
    (POSIX), each once: the recordings a build verifies on."""
    found = set()
    for model in config.models:
        inputs = model.options.verify.inputs if model.options.verify is not None else None
        if inputs is None:
            continue
        try:
            relative = Path(inputs).resolve().relative_to(root.resolve())
        except ValueError:  # outside the project: never packed anyway
            continue
        if relative.parts:
            found.add(PurePosixPath(*relative.parts).as_posix())
    return sorted(found)


def hook_table(target: str | None = None) -> str:
    """The TOML path of the hook's table: global, or the given target's own (which replaces it)."""
    if target is None:
        return f"tool.hatch.build.hooks.{PLUGIN_NAME}"
    return f"tool.hatch.build.targets.{target}.hooks.{PLUGIN_NAME}"


def load_config(raw: Mapping[str, Any], root: Path, target: str = "wheel",
                table: str | None = None, models_root: Path | None = None, *,
                dependencies: Sequence[str] = (), recordings_optional: bool = False,
                flags: CommandLine | None = None, layout: Layout | None = None) -> HookConfig:
    """Check ``raw`` (the hook's table) against the project at ``root``, with ``flags`` (a
    command's) overriding it key by key; ``dependencies`` (the project's
    ``[project].dependencies``) give the default ``runtimes``. The one resolution the hook,
    ``shrink``, ``wheel`` and ``check`` share.

    ``models`` globs match files under ``models_root`` (a built wheel's unpacked files), or under
    ``root`` by default, spelled as project paths or as in-wheel paths (``layout``, by default the
    project's: :mod:`hatch_shrinkray.shipping.layout`); ``inputs`` and ``cache`` paths stay
    relative to the project ``root``.
    ``recordings_optional``: an ``inputs`` path that does not exist is dropped instead of refused
    (a build from our sdist, whose manifest covers the models and which ships no recording).
    Raises :class:`ConfigurationError` listing every problem found.
    """
    flags = flags or CommandLine()
    globs = _Globs(models_root or root, layout or project_layout(root), models_root is not None)
    table = table or hook_table()
    errors: list[str] = []
    allowed = (*_HOOK_KEYS, *ENGINE_KEYS, *RESERVED_KEYS)
    errors += _unknown_key_errors(raw, allowed, table)

    base = read_settings(raw, table, errors)
    if "runtimes" not in raw:
        base["runtimes"] = default_runtimes(dependencies)
    base_names = {f: _field(table, key) for key, f in ENGINE_KEYS.items()}
    flag_names = {ENGINE_KEYS[k]: flag for k, flag in flags.names.items()}

    models = _selected(raw, flags, globs, table, errors)

    overrides = _read_overrides(raw.get("overrides", []), globs, table, set(models), errors,
                                selected_here=not flags.models)
    for settings, where in ((base, table), *((override, t) for _, override, t in overrides)):
        if isinstance(settings.get("inputs"), str) and _missing(root / settings["inputs"]):
            if not recordings_optional:
                errors.append(_missing_inputs(settings["inputs"], root, where))
            del settings["inputs"]  # reported (or not needed): the value checks would report it again

    errors += _value_errors(base, base_names, overrides, root)
    entries = [_entry(relpath, base, overrides, flags, table=table, root=root) for relpath in sorted(models)]
    if flags.settings:
        given = options_from({**base, **flags.settings}, root)
        errors += [e for e in option_errors(given, {**base_names, **flag_names}) if e not in errors]

    values = {k.key: raw.get(k.key, getattr(HookConfig, k.key, None)) for k in HOOK_KEYS}  # a field's default
    values |= {} if flags.pins is None else {"pins": flags.pins}
    read: dict[str, Any] = {}
    for key in HOOK_KEYS:  # in table order, so are the errors
        value = values[key.key]
        if key.choices:
            read[key.key] = value
            if value not in key.choices:
                errors.append(f"{_field(table, key.key)} must be one of {', '.join(map(repr, key.choices))}; "
                              f"got {value!r}")
        elif key.key == "cache":
            read["cache"], read["cache_dir"] = _read_cache(value, root, table, errors)
        elif key.key == "plan":
            read["plan_file"], read["plans"] = _read_plan_key(value, root, table, errors) if flags.plan is None \
                else _read_plan_file(flags.plan, str(flags.plan), "--plan", errors)

    if errors:
        raise ConfigurationError(errors, table)
    return HookConfig(table=table, target=target, models=tuple(entries), **read)


def _selected(raw: Mapping[str, Any], flags: CommandLine, globs: _Globs, table: str, errors: list[str]) -> list[str]:
    """The model files the table's ``models`` (or the command's, which replace them) select."""
    if flags.models:
        return globs.match(flags.models, flags.models_flag, errors)
    if "models" not in raw:
        errors.append(f"{_field(table, 'models')} is required")
        return []
    patterns = read_strings(raw["models"], f"{table}.models", errors)
    return [] if patterns is None else globs.match(patterns, f"{table}.models", errors)


def _entry(relpath: str, base: Mapping[str, Any], overrides: list[tuple[set[str], dict[str, Any], str]],
           flags: CommandLine, *, table: str, root: Path) -> ModelEntry:
    """One model's options: the table's, each override that selects it in order, then the flags."""
    settings = dict(base)
    names = {f: f"{table}.{key}" for key, f in ENGINE_KEYS.items()}
    for selected, override, override_table in overrides:
        if relpath in selected:
            settings.update(override)
            names.update({ENGINE_KEYS[k]: f"{override_table}.{k}" for k in override if k in ENGINE_KEYS})
    settings.update(flags.settings)
    names.update({ENGINE_KEYS[k]: flag for k, flag in flags.names.items()})
    return ModelEntry(relpath, options_from(settings, root), names)


def _missing(path: Path) -> bool:
    """Whether nothing is at ``path`` (what cannot be read there is :func:`inputs_problem`'s to say)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, ValueError):  # unreadable, or not a path the system takes (a NUL in it)
        return False
    return False


def _missing_inputs(inputs: str, root: Path, table: str) -> str:
    """The error for an ``inputs`` that does not exist yet, with the command that makes it."""
    if inputs.endswith(".npz"):
        return (f"{_field(table, 'inputs')} names a file that does not exist: {inputs} (save real samples there, or "
                f"point it at a recording: `{record_command(root, default_recording(root))}`)")
    return (f"{_field(table, 'inputs')} names a recording that does not exist yet: {inputs}; make it with "
            f"`{record_command(root, inputs)}` and commit it, or remove the key to verify on generated inputs")


def _value_errors(base: dict[str, Any], base_names: dict[str, str],
                  overrides: list[tuple[set[str], dict[str, Any], str]], root: Path) -> list[str]:
    """Engine-option value problems, each attributed to the table that set the value.

    Every value is checked on its own, so checking the top-level table and then each override
    layered on it (whether or not it matched a model) finds every problem exactly once.
    """
    errors = option_errors(options_from(base, root), base_names)
    for _, override, override_table in overrides:
        names = {**base_names, **{ENGINE_KEYS[k]: _field(override_table, k) for k in override}}
        errors += [e for e in option_errors(options_from({**base, **override}, root), names)
                   if e not in errors]
    return errors


def default_runtimes(dependencies: Sequence[str]) -> tuple[str, ...]:
    """What the project's own requirements say its users run: the lowest lower bound of its
    onnxruntime requirements (the oldest release tested, ``OLDEST_ONNXRUNTIME``, when none has
    one: its users may run any); nothing without onnxruntime."""
    floors: list[Version] = []
    targeted = False
    for text in dependencies:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) not in ONNXRUNTIME_DISTRIBUTIONS:
            continue
        targeted = True
        floors += [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=", ">")]
    return () if not targeted else (f"onnxruntime>={min(floors).base_version if floors else OLDEST_ONNXRUNTIME}",)


def _field(table: str, key: str) -> str:
    return f"Field `{table}.{key}`"


def _unknown_key_errors(raw: Mapping[str, Any], allowed: tuple[str, ...], table: str) -> list[str]:
    errors = []
    for key in raw:
        if key in allowed:
            continue
        message = f"Unknown field `{table}.{key}`"
        close = did_you_mean(str(key), allowed)
        if close:
            message += f"; did you mean `{close}`?"
        errors.append(message)
    return errors


@dataclass(frozen=True)
class _Globs:
    """Where ``models`` globs look (the project, or a wheel's unpacked files) and how a path there
    is also spelled (in the wheel, or in the project)."""

    root: Path
    layout: Layout
    in_wheel: bool

    def match(self, patterns: Sequence[str], path: str, errors: list[str]) -> list[str]:
        """The files that ``patterns`` select, in pattern order; every pattern must match something
        (``path`` names the setting in messages)."""
        if not patterns:
            errors.append(f"Field `{path}` must list at least one glob pattern")
        models: list[str] = []
        for pattern in patterns:
            matched = self.glob(pattern, path, errors)
            if matched is not None and not matched:
                errors.append(NoMatch(path, pattern, "the wheel" if self.in_wheel else "the project",
                                      model_files(self.root)))
            models += [m for m in matched or [] if m not in models]
        return models

    def glob(self, pattern: str, path: str, errors: list[str]) -> list[str] | None:
        """Relative POSIX paths of the files ``pattern`` matches in either spelling, sorted.

        Patterns must stay inside the project: the force-include target is the same relative path,
        and a file outside the root has no place in the archive.
        """
        pure = PurePosixPath(pattern)
        if not pattern or pure.is_absolute() or Path(pattern).is_absolute() or ".." in pure.parts:
            errors.append(f"Field `{path}` pattern `{pattern}` must be a relative path inside the project")
            return None
        found: set[str] = set()
        for spelling in self.layout.spellings(pattern, self.in_wheel):
            try:
                found |= {p.relative_to(self.root).as_posix() for p in self.root.glob(spelling) if p.is_file()}
            except ValueError as exc:
                errors.append(f"Field `{path}` pattern `{pattern}` is not a valid glob: {exc}")
                return None
        return sorted(found)


def _read_overrides(value: Any, globs: _Globs, table: str, models: set[str], errors: list[str], *,
                    selected_here: bool = True) -> list[tuple[set[str], dict[str, Any], str]]:
    """``(matched model paths, engine settings, TOML path)`` for each override, in order.

    An override that matches none of the models is an error when the table selected them
    (``selected_here``), not when a command's flags chose a few of them."""
    path = f"{table}.overrides"
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        errors.append(f"Field `{path}` must be an array of tables")
        return []
    overrides = []
    for i, override in enumerate(value):
        override_table = f"{path}[{i}]"
        table_only = [k for k in override if k in (*_HOOK_KEYS, *RESERVED_KEYS) and k != "models"]
        errors += [f"{_field(override_table, k)} is not allowed in an override; set it in `{table}`"
                   for k in table_only]
        errors += _unknown_key_errors({k: v for k, v in override.items() if k not in table_only},
                                      ("models", *ENGINE_KEYS), override_table)
        settings = read_settings(override, override_table, errors)
        matched: set[str] = set()
        if "models" not in override:
            errors.append(f"{_field(override_table, 'models')} is required")
        else:
            for pattern in read_strings(override["models"], f"{override_table}.models", errors) or []:
                hits = set(globs.glob(pattern, f"{override_table}.models", errors) or []) & models
                if not hits and models and selected_here:
                    errors.append(f"{_field(override_table, 'models')} pattern `{pattern}` matches "
                                  f"none of the models selected by `{table}.models`")
                matched |= hits
        overrides.append((matched, settings, override_table))
    return overrides


def _read_cache(value: Any, root: Path, table: str, errors: list[str]) -> tuple[bool, Path | None]:
    if isinstance(value, bool):
        return value, None
    if isinstance(value, str) and value:
        return True, (root / Path(value).expanduser()).resolve()
    errors.append(f"{_field(table, 'cache')} must be a boolean or a directory path")
    return True, None


def _read_plan_file(path: Path, shown: str, name: str, errors: list[str]) -> tuple[Path | None, dict[str, PlanEntry]]:
    """The plan file at ``path`` and its entries (``name``: the setting that names it, ``shown`` as
    its value, for messages)."""
    if not path.is_file():
        errors.append(f"{name} names a file that does not exist: {shown} (hatch-shrinkray check --fix or --search "
                      "writes it)")
        return None, {}
    try:
        return path, read_plan(path)
    except ShrinkrayError as exc:
        errors.extend(f"{name}: {line}" for line in str(exc).splitlines())
        return path, {}


def _read_plan_key(value: Any, root: Path, table: str,
                   errors: list[str]) -> tuple[Path | None, dict[str, PlanEntry]]:
    """The plan file and its entries: ``plan = "file.json"``, ``false``, or by default
    ``shrinkray-plan.json`` at the project root when it exists."""
    if value is None or value is True:
        value = PLAN_NAME if (root / PLAN_NAME).is_file() else False
    if value is False:
        return None, {}
    if isinstance(value, str) and value.endswith(".json"):
        return _read_plan_file(root / value, value, _field(table, "plan"), errors)
    errors.append(f"{_field(table, 'plan')} must be the path of a .json plan file, relative to the project root, "
                  "or false")
    return None, {}
