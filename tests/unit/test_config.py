"""The hook table is checked in one pass: every mistake is listed, each with its full TOML path."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hardening import RUNTIME_NEEDS_A_VERSION

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.options import METHODS, ShrinkOptions, VerifyOptions
from hatch_shrinkray.shipping.config import (
    ENGINE_KEYS,
    ConfigurationError,
    HookConfig,
    ModelEntry,
    hook_table,
    load_config,
)

T = "tool.hatch.build.hooks.shrinkray"
ONE_OF = f"must be one of {', '.join(METHODS)}"
MODELS = "src/pkg/models/a.onnx, src/pkg/models/b.onnx, src/pkg/models/deep/c.onnx"
"""The model files of the ``root`` project, which a pattern that matches none lists."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for rel in ("src/pkg/models/a.onnx", "src/pkg/models/b.onnx", "src/pkg/models/deep/c.onnx",
                "data/inputs.npz", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    return tmp_path


def errors_of(raw: dict[str, Any], root: Path, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigurationError) as info:
        load_config(raw, root, **kwargs)
    return info.value.errors


def test_minimal_config_uses_engine_defaults(root: Path) -> None:
    config = load_config({"models": ["src/pkg/models/*.onnx"]}, root)
    assert config == HookConfig(
        table=T, target="wheel", sdist="shrunk", cache=True, cache_dir=None,
        models=(
            ModelEntry("src/pkg/models/a.onnx", ShrinkOptions()),
            ModelEntry("src/pkg/models/b.onnx", ShrinkOptions()),
        ),
    )


def test_double_star_matches_nested_files_once(root: Path) -> None:
    config = load_config({"models": ["src/**/*.onnx", "src/pkg/models/a.onnx"]}, root)
    assert [m.relpath for m in config.models] == [
        "src/pkg/models/a.onnx", "src/pkg/models/b.onnx", "src/pkg/models/deep/c.onnx"]


def test_every_option_is_mapped(root: Path) -> None:
    raw = {
        "models": ["src/pkg/models/a.onnx"], "method": "int4", "min-elements": 10,
        "exclude-tensors": ["W"], "exclude-ops": ["Gather"], "dedup": False, "scheme": "asymmetric",
        "levels": 16, "decode": "fast", "block-size": 64, "verify": True, "max-rel-l2": 1,
        "min-cosine": 0.9, "min-agreement": 0.5, "inputs": "data/inputs.npz", "dims": {"batch": 4},
        "default-dim": 2, "int-range": [1, 9], "samples": 3, "seed": 7, "sdist": "original",
        "budget-rel-l2": 0.05, "budget-cosine": 0.999, "budget-agreement": 0.9, "rounding": "nearest",
        "cache": ".cache/sr", "dependencies": ["x"], "require-runtime-dependencies": False,
        "require-runtime-features": [], "enable-by-default": True,
    }
    config = load_config(raw, root, target="sdist")
    assert config.models[0].options == ShrinkOptions(
        method="int4", min_elements=10, exclude_tensors=("W",), exclude_ops=("Gather",), dedup=False,
        scheme="asymmetric", levels=16, decode="fast", block_size=64, budget_rel_l2=0.05,
        budget_cosine=0.999, budget_agreement=0.9, rounding="nearest",
        verify=VerifyOptions(inputs=root / "data/inputs.npz", dims=(("batch", 4),), default_dim=2,
                             int_low=1, int_high=9, samples=3, seed=7, max_rel_l2=1.0,
                             min_cosine=0.9, min_agreement=0.5))
    assert config.sdist == "original"
    assert config.ships_originals
    assert config.cache_dir == (root / ".cache/sr").resolve()


def test_every_engine_option_has_a_key() -> None:
    """A new ShrinkOptions/VerifyOptions field must get a TOML key here too (``plan`` comes from the
    plan file the ``plan`` key names)."""
    mapped = set(ENGINE_KEYS.values()) - {"int_range"} | {"int_low", "int_high", "plan"}
    assert mapped == {f.name for f in (*fields(ShrinkOptions), *fields(VerifyOptions))}


def test_verify_false_switches_verification_off(root: Path) -> None:
    config = load_config({"models": ["src/pkg/models/a.onnx"], "verify": False}, root)
    assert config.models[0].options.verify is None


def test_cache_false_disables(root: Path) -> None:
    config = load_config({"models": ["src/pkg/models/a.onnx"], "cache": False}, root)
    assert (config.cache, config.cache_dir) == (False, None)


def test_overrides_apply_in_order_later_wins(root: Path) -> None:
    raw = {
        "models": ["src/**/*.onnx"], "method": "fp16",
        "overrides": [
            {"models": ["src/pkg/models/*.onnx"], "method": "int8", "min-elements": 5},
            {"models": ["src/pkg/models/b.onnx"], "method": "int4", "verify": False},
        ],
    }
    by_path = {m.relpath: m.options for m in load_config(raw, root).models}
    assert by_path["src/pkg/models/a.onnx"] == ShrinkOptions(method="int8", min_elements=5)
    assert by_path["src/pkg/models/b.onnx"] == ShrinkOptions(method="int4", min_elements=5, verify=None)
    assert by_path["src/pkg/models/deep/c.onnx"] == ShrinkOptions(method="fp16")


def test_models_is_required(root: Path) -> None:
    assert errors_of({}, root) == [f"Field `{T}.models` is required"]


def test_models_errors(root: Path) -> None:
    assert errors_of({"models": "src/*.onnx"}, root) == [f"Field `{T}.models` must be an array of strings"]
    assert errors_of({"models": []}, root) == [f"Field `{T}.models` must list at least one glob pattern"]
    assert errors_of({"models": ["src/**/*.onnx", "nope/*.onnx", "../x.onnx", "/abs.onnx"]}, root) == [
        f"Field `{T}.models` pattern `nope/*.onnx` matches no file\n  the project's models: {MODELS}",
        f"Field `{T}.models` pattern `../x.onnx` must be a relative path inside the project",
        f"Field `{T}.models` pattern `/abs.onnx` must be a relative path inside the project",
    ]


def test_the_patterns_that_match_nothing_are_data_as_well_as_words(root: Path) -> None:
    """``check`` in an installed package reads which patterns matched nothing from the error, not its text."""
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["nope/*.onnx", "src/**/*.onnx", "gone.onnx"]}, root)
    assert caught.value.unmatched == ("nope/*.onnx", "gone.onnx") and len(caught.value.errors) == 2
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["src/**/*.onnx"], "methd": "int8"}, root)
    assert caught.value.unmatched == ()


def test_unknown_keys_suggest_the_closest(root: Path) -> None:
    assert errors_of({"models": ["src/**/*.onnx"], "methd": "int8", "zzz": 1}, root) == [
        f"Unknown field `{T}.methd`; did you mean `method`?",
        f"Unknown field `{T}.zzz`",
    ]


def test_all_type_and_value_errors_at_once(root: Path) -> None:
    """Every problem at once, type errors first, then the values' in the option table's order."""
    raw = {
        "models": ["src/pkg/models/a.onnx"], "method": "int9", "min-elements": "big", "levels": 1,
        "exclude-ops": "Gather", "dedup": "yes", "block-size": 24, "verify": 1, "max-rel-l2": "0.1",
        "min-cosine": 2, "inputs": "data/missing.npz", "dims": {"batch": 0, "seq": "long"},
        "int-range": [5], "seed": -1, "sdist": "tiny", "cache": 3, "rounding": "closest", "pins": "fix",
    }
    assert errors_of(raw, root) == [
        f"Field `{T}.min-elements` must be an integer",
        f"Field `{T}.exclude-ops` must be an array of strings",
        f"Field `{T}.dedup` must be a boolean",
        f"Field `{T}.verify` must be a boolean",
        f"Field `{T}.max-rel-l2` must be a number",
        f"Field `{T}.dims.batch` must be a positive integer; got 0",
        f"Field `{T}.dims.seq` must be a positive integer; got 'long'",
        f"Field `{T}.int-range` must be an array of two integers [low, high]",
        f"Field `{T}.inputs` names a file that does not exist: data/missing.npz (save real samples there, or point "
        "it at a recording: `hatch-shrinkray record -o shrinkray-inputs -- COMMAND`)",
        f"Field `{T}.method` {ONE_OF}; got 'int9' (did you mean 'int8'?)",
        f"Field `{T}.levels` must be an integer from 2 to 65536; got 1",
        f"Field `{T}.block-size` must be one of 16, 32, 64, 128, 256; got 24",
        f"Field `{T}.rounding` must be one of output-aware, nearest; got 'closest'",
        f"Field `{T}.min-cosine` must be a number from 0.0 to 1.0; got 2.0",
        f"Field `{T}.seed` must be a non-negative integer; got -1",
        f"Field `{T}.sdist` must be one of 'shrunk', 'original'; got 'tiny'",
        f"Field `{T}.cache` must be a boolean or a directory path",
        f"Field `{T}.pins` must be one of 'warn', 'rewrite'; got 'fix'",
    ]


@pytest.mark.parametrize("value", ["", 42, ["a.npz"]])
def test_inputs_must_be_a_path(root: Path, value: object) -> None:
    assert errors_of({"models": ["src/pkg/models/a.onnx"], "inputs": value}, root) == [
        f"Field `{T}.inputs` must be a path relative to the project root (a recording directory or a .npz file)"]


def test_override_errors_name_the_override(root: Path) -> None:
    raw = {
        "models": ["src/pkg/models/*.onnx"], "method": "bad",
        "overrides": [
            {"method": "fp17"},
            {"models": ["src/pkg/models/deep/*.onnx"], "levels": 0, "sdist": "original"},
            {"models": ["src/pkg/models/b.onnx"], "method": "bad"},
        ],
    }
    o = f"{T}.overrides"
    assert errors_of(raw, root) == [
        f"Field `{o}[0].models` is required",
        f"Field `{o}[1].sdist` is not allowed in an override; set it in `{T}`",
        f"Field `{o}[1].models` pattern `src/pkg/models/deep/*.onnx` matches none of the models "
        f"selected by `{T}.models`",
        f"Field `{T}.method` {ONE_OF}; got 'bad'",
        f"Field `{o}[0].method` {ONE_OF}; got 'fp17' (did you mean 'fp16'?)",
        f"Field `{o}[1].levels` must be an integer from 2 to 65536; got 0",
        f"Field `{o}[2].method` {ONE_OF}; got 'bad'",
    ]
    assert errors_of({"models": ["src/pkg/models/a.onnx"], "overrides": {"models": []}}, root) == [
        f"Field `{T}.overrides` must be an array of tables"]


def test_target_level_table_is_named(root: Path) -> None:
    table = hook_table("wheel")
    assert table == "tool.hatch.build.targets.wheel.hooks.shrinkray"
    assert errors_of({"models": ["x/*.onnx"]}, root, table=table) == [
        f"Field `{table}.models` pattern `x/*.onnx` matches no file\n  the project's models: {MODELS}"]


def test_error_is_a_shrinkray_error_listing_everything(root: Path) -> None:
    with pytest.raises(ShrinkrayError) as info:
        load_config({"models": ["x/*.onnx"], "levels": 1}, root)
    assert str(info.value) == (
        "Invalid configuration for build hook `shrinkray`:\n"
        f"- Field `{T}.models` pattern `x/*.onnx` matches no file\n  the project's models: {MODELS}\n"
        f"- Field `{T}.levels` must be an integer from 3 to 255 with method int8 (255: plain int8); got 1")


# ---------------------------------------------------------------------------------------------
# Numbers: NaN, inf and out-of-range values are refused with one line naming the option.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_hook_table_refuses_inf_and_minus_one(tmp_path: Path) -> None:
    from hatch_shrinkray.shipping.config import ConfigurationError, load_config

    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["m.onnx"], "max-rel-l2": float("inf"), "min-cosine": -1,
                     "budget-agreement": float("nan")}, tmp_path)
    table = "tool.hatch.build.hooks.shrinkray"
    assert caught.value.errors == [
        f"Field `{table}.budget-agreement` must be a number from 0.0 to 1.0; got nan",
        f"Field `{table}.max-rel-l2` must be a number from 0.0 to 1.0; got inf",
        f"Field `{table}.min-cosine` must be a number from 0.0 to 1.0; got -1.0",
    ]


# ---------------------------------------------------------------------------------------------
# Other tracebacks and hangs of the same kind.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.




# ---------------------------------------------------------------------------------------------
# Values that mean nothing are refused in one line naming the flag or key.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def test_a_table_runtime_without_a_version_and_a_negative_seed_are_refused(tmp_path: Path) -> None:
    from hatch_shrinkray.shipping.config import ConfigurationError, load_config

    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(ConfigurationError) as caught:
        load_config({"models": ["m.onnx"], "runtimes": ["onnxruntime"], "seed": -1}, tmp_path)
    table = "tool.hatch.build.hooks.shrinkray"
    assert caught.value.errors == [f"Field `{table}.runtimes` {RUNTIME_NEEDS_A_VERSION}",
                                   f"Field `{table}.seed` must be a non-negative integer; got -1"]
    # A dependency on onnxruntime without a lower bound targets the oldest release tested.
    config = load_config({"models": ["m.onnx"]}, tmp_path, dependencies=["onnxruntime"])
    assert config.models[0].options.runtimes == ("onnxruntime>=1.16.3",)
