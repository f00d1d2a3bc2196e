"""What each key of the configuration table means, for people.

The docs' configuration reference is generated from this and from :mod:`hatch_shrinkray.shipping.config`
(which keys exist, their TOML types) and :mod:`hatch_shrinkray.options` (their defaults), by
``docs/hooks.py``; ``tests/test_docs.py`` fails when a key the table accepts has no entry here, or
an entry names a key the table no longer accepts.
"""

from __future__ import annotations

KEY_HELP: dict[str, tuple[str | None, str]] = {
    # key: (default as the docs show it, or None to take it from the options dataclasses; meaning)
    "models": ("required", "glob patterns of the models to ship shrunk, relative to the project root (`**` "
               "allowed); a pattern that matches nothing is an error. For `hatch-shrinkray wheel` they "
               "match paths inside the wheel"),
    "method": (None, "the encoding method: `int8`, `fp16`, `float-levels`, `dedup`, `dynamic`, `int4` or `auto` "
               "([Methods and encodings](methods.md))"),
    "min-elements": (None, "the smallest float tensor worth encoding; smaller ones stay float"),
    "exclude-tensors": (None, "keep tensors whose name matches one of these globs"),
    "exclude-ops": (None, "keep tensors consumed by one of these op types"),
    "dedup": (None, "store identical tensors once first (lossless)"),
    "scheme": (None, "`int8`: `symmetric` or `asymmetric` grid"),
    "levels": ("`255` (`int8`), `256` (`float-levels`)", "levels per channel. `int8`: 3..255, fewer distinct "
               "codes in the same int8 tensor (same decode and load cost, a smaller wheel and web download); "
               "`float-levels`: 2..65536"),
    "decode": (None, "`int8`: `float` (`Cast -> Mul`, folded at load) or `fast` (`DequantizeLinear` before "
               "MatMul, opset >= 13, int8 activations; kept only where the build's onnxruntime fuses it)"),
    "block-size": (None, "`int4` block size: 16, 32, 64, 128 or 256"),
    "budget-rel-l2": ("round-to-nearest int8's", "`auto`: the largest relative L2 of any output on the fitting "
                      "samples (0 to 1); unset: round-to-nearest int8's there, less half of what output-aware "
                      "rounding wins (a margin), twice that where outputs carry answers"),
    "budget-cosine": ("round-to-nearest int8's", "`auto`: the smallest cosine of any output (0 to 1); unset: "
                      "relative to int8's, as `budget-rel-l2`"),
    "budget-agreement": ("round-to-nearest int8's", "`auto`: the smallest share of unchanged discrete answers "
                         "(0 to 1); unset: at least round-to-nearest int8's, with a margin as `budget-rel-l2`"),
    "budget-load": ("`1.25` (`1.0` with a `web` runtime)", "`auto`: the most its decodes may cost to fold when a "
                    "session is created, as a multiple of int8 of every weight (its rungs fold at most int8's)"),
    "encodings": (None, "per-tensor encodings whatever the method: `{ \"conv1.*\" = \"fp16\" }` (name globs; "
                  "`float32`, `fp16`, `int16`, `int12`, `int10`, `int8`, `int6`, `int4`); two patterns that "
                  "give one tensor different encodings are an error"),
    "runtimes": ("from `[project].dependencies`", "where the shrunk model runs: `onnxruntime>=X.Y` (a floor; a bare "
                 "`onnxruntime` is refused), "
                 "`web`, `openvino`; methods those runtimes cannot load, or would decode on every inference, are "
                 "refused ([Where the shrunk models run](runtimes.md))"),
    "target": (None, "the size that counts: `wheel` (the zip member, deflated as hatchling writes it), `web` "
               "(brotli quality 11; installs the `compress` extra) or `disk` (the raw file). A shrunk model "
               "ships only if it is smaller there"),
    "rounding": ("`\"output-aware\"`", "int8 codes (`int8`, `auto`) with real `inputs`: `output-aware` rounds "
                 "them to keep the outputs on the recording, where that does no harm on units it was not fitted "
                 "on; `nearest` always rounds to nearest, and the inputs only verify. Set `nearest` for a model "
                 "when `hatch-shrinkray check` shows your tests judge its fitted codes worse "
                 "([Checking](checking.md))"),
    "strict": (None, "fail the build for a model that generated inputs cannot verify (the shrunk model fails on "
               "them, the original's outputs carry no signal there, or it does not run on them) instead of "
               "shipping its original with the `hatch-shrinkray record` command that lets the next build shrink "
               "it; real recorded inputs that fail always fail it ([Troubleshooting](troubleshooting.md))"),
    "verify": ("`true`", "compare the shrunk model's outputs with the original's; `false` turns verification off"),
    "max-rel-l2": (None, "verification: the largest relative L2 of any output (0 to 1)"),
    "min-cosine": (None, "verification: the smallest cosine of any output (0 to 1)"),
    "min-top1": (None, "verification: the smallest agreement of discrete answers (0 to 1), judged with a "
                 "95% confidence bound ([How sure](evidence.md))"),
    "inputs": ("none: generated inputs", "real sample inputs, relative to the project: a recording directory "
               "(`hatch-shrinkray record`; each model finds its own file by sha256), a recording file, or a "
               "`.npz` with one array per graph input ([Recording real inputs](recording.md))"),
    "dims": (None, "generated inputs only: values for symbolic dimensions, `{ batch = 1, seq = 128 }`"),
    "default-dim": ("plausible", "generated inputs only: the value of other symbolic dimensions (1 for a "
                    "batch axis, a name that leads some input, else the larger of 32 and the input's largest fixed "
                    "dimension; a name gets one size in every input; when the model does not run on those, 16000 and "
                    "512 for the last axis of a waveform-like input, then 224, 16 and 1 are tried, for the batch "
                    "last); the verification line names the sizes used, `(batch=1, seq=32)`"),
    "int-range": ("`[0, 64]`", "generated inputs only: the range `[low, high)` of integer inputs"),
    "samples": (None, "generated inputs only: how many samples"),
    "seed": (None, "generated inputs only: the random seed (0 or more)"),
    "judges": (None, "how an output's answers are compared, instead of the judge its shape implies: "
               "`{ \"probability_map\" = \"map\", \"stateN\" = \"off\" }` ([How sure](evidence.md))"),
    "sdist": ("`\"shrunk\"`", "hook only: `original` ships the original models in the sdist (the wheel is still "
              "shrunk)"),
    "cache": ("`true`", "cache shrunk models in the user cache directory; a string names the directory "
              "(`HATCH_SHRINKRAY_CACHE_DIR` overrides the default); `false` disables it. The directory must be "
              "private ([Trust and security](trust.md))"),
    "pins": ("`\"warn\"`", "where the package's own text files (`.py`, `.yaml`, `.json`, `.txt`, ...) hold the "
             "sha256, sha1 or md5 of an original model it ships shrunk (a digest check before loading): `warn` names "
             "each such file and the digest it needs; `rewrite` ships those files with the shrunk model's digest "
             "instead (the hook ships a rewritten copy and never edits the project; `hatch-shrinkray wheel` "
             "rewrites the wheel's member and its RECORD) ([Checking with your own tests](checking.md))"),
    "overrides": ("`[]`", "an array of tables, each with its own `models` globs and any engine key, applied to "
                  "the models it selects, in order"),
    "plan": ("`\"shrinkray-plan.json\"` if present", "the plan file `hatch-shrinkray check --fix` and "
             "`hatch-shrinkray check --search` write; `false` ignores it "
             "([Checking with your own tests](checking.md))"),
}
