"""What each key of the configuration table means, for people.

The docs' configuration reference is generated from this, by ``docs/hooks.py``: the engine keys'
meanings and defaults are declared with the keys themselves (:mod:`hatch_shrinkray.option_table`),
the hook's own keys' here; ``tests/test_docs.py`` fails when a key the table accepts has no entry
here, or an entry names a key the table no longer accepts.
"""

from __future__ import annotations

from hatch_shrinkray.option_table import OPTIONS

HOOK_KEY_HELP: dict[str, tuple[str, str]] = {
    # key: (default as the docs show it, meaning)
    "models": ("required", "glob patterns of the models to ship shrunk, relative to the project root (`**` "
               "allowed); a pattern that matches nothing is an error. For `hatch-shrinkray wheel` they "
               "match paths inside the wheel"),
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
"""The keys the hook reads itself (:mod:`hatch_shrinkray.shipping.config`)."""

KEY_HELP: dict[str, tuple[str | None, str]] = {**{o.key: (o.shown, o.help) for o in OPTIONS}, **HOOK_KEY_HELP}
"""Every key: (its default as the docs show it, or None to take it from the options dataclasses; its
meaning)."""
