"""The missing-engine error names an install that works for how the core was installed: a checkout
(not on PyPI yet) by its directory, with the extra; otherwise by name (speechmos's new user followed a
`pip install 'hatch-shrinkray==0.1.0'` that no index had)."""

from __future__ import annotations

from hatch_shrinkray.shipping.requirements import install_hint


def test_a_checkout_is_named_by_its_directory() -> None:
    direct = {"url": "file:///work/src/hatch-shrinkray", "dir_info": {}}
    assert install_hint(direct) == "pip install '/work/src/hatch-shrinkray[engine]'"


def test_an_editable_checkout_stays_editable() -> None:
    direct = {"url": "file:///home/me/hatch%20shrinkray", "dir_info": {"editable": True}}
    assert install_hint(direct) == "pip install -e '/home/me/hatch shrinkray[engine]'"


def test_an_index_or_a_wheel_file_is_named_by_the_distribution() -> None:
    wheel = {"url": "file:///tmp/wh/hatch_shrinkray_core-0.1.0-py3-none-any.whl", "archive_info": {}}
    for direct in ({}, wheel):
        hint = install_hint(direct)
        assert hint.startswith("pip install 'hatch-shrinkray==") and "'hatch-shrinkray-core[engine]==" in hint
        assert "(" not in hint  # the error wraps its hint in parentheses once
