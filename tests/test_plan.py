"""``shipping.plan``: the plan ``check --fix`` writes and ``shrink --plan`` and the build read. A junk
plan or a special file is one line, a plan naming a tensor the model lacks is an error, and
``shrink --plan`` says whether it ships the bytes ``check`` accepted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hardening import MODEL, cli, files_under, hook_build_error, one_error, write_project

from onnx_builders import mlp, save

# ---------------------------------------------------------------------------------------------
# Tracebacks that are now one line: sample files, generated inputs, plans, check's report files.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


PLAN_HINT = ("(hatch-shrinkray check --fix (or --search) writes it; fix the entry, or delete the file and run check "
             "--fix again)")


@pytest.mark.parametrize(("text", "why"), [
    ("[" * 100_000 + "]" * 100_000, "its JSON is nested too deeply"),
    ('{"format": "hatch-shrinkray-plan", "version": 1, "models": {"' + "0" * 64 + '": {"model": "m", '
     '"method": "int8", "tensors": [], "checked": "abc"}}}',
     f'models.{"0" * 64}.checked: expected an object, got "abc"'),
    ('{"format": "hatch-shrinkray-plan", "version": 1, "models": {"' + "0" * 64 + '": {"model": "m", '
     '"method": "int8", "tensors": [{"scope": "main", "tensor": ["W1"], "encoding": "fp16"}]}}}',
     f"models.{'0' * 64}.tensors[0][1]: expected a string, got a list"),
])
def test_a_junk_plan_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    (tmp_path / "plan.json").write_text(text)
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(tmp_path / "plan.json")))
    assert line == f"error: {tmp_path / 'plan.json'}: {why} {PLAN_HINT}", line


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_plan_that_is_a_special_file_is_one_line(tmp_path: Path, special: str) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    plan = Path("/dev/zero") if special == "/dev/zero" else tmp_path / "plan.json"
    if special == "fifo":
        os.mkfifo(plan)
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(plan), timeout=60))
    kind = "a character device" if special == "/dev/zero" else "a FIFO"
    assert line == f"error: {plan}: cannot read the plan: is {kind}, not a regular file {PLAN_HINT}", line


# ---------------------------------------------------------------------------------------------
# Words: `shrink --plan` says whether it ships the bytes `check` accepted and names each encoding;
# a plan naming a tensor the model does not have is an error.
# Hostile inputs: each case ends in one line naming what to fix, with nothing left behind.


def write_a_plan(path: Path, model: Path, tensors: tuple[tuple[str, str, str], ...], **checked: str) -> Path:
    from hatch_shrinkray.files import file_sha256
    from hatch_shrinkray.shipping.plan import PlanEntry, write_plan

    write_plan(path, {file_sha256(model): PlanEntry(model.name, "int8", tensors, dict(checked))})
    return path


def test_shrink_plan_says_whether_it_ships_what_check_accepted(tmp_path: Path) -> None:
    from hatch_shrinkray.files import file_sha256

    src = save(mlp(), tmp_path / "m.onnx")
    plan = write_a_plan(tmp_path / "plan.json", src, (("main", "W1", "fp16"),), shrunk_sha256="0" * 64)
    proc = cli("shrink", str(src), "-o", str(tmp_path / "one"), "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert ", int8 + 1 fp16 tensor: " in proc.stdout and "int8 tensor" not in proc.stdout, proc.stdout
    assert (f"shrinkray: {src}: differs from the model `check` accepted (the options, inputs or tool versions changed "
            "since): its tests did not judge these bytes") in proc.stderr, proc.stderr
    shipped = file_sha256(tmp_path / "one" / "m.onnx")
    write_a_plan(plan, src, (("main", "W1", "fp16"),), shrunk_sha256=shipped, verdict="0 of 3 tests regressed")
    proc = cli("shrink", str(src), "-o", str(tmp_path / "two"), "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert f"shrinkray: {src}: this is the model `check` accepted (0 of 3 tests regressed)" in proc.stderr


def test_a_plan_naming_a_tensor_the_model_lacks_is_an_error(tmp_path: Path) -> None:
    src = save(mlp(), tmp_path / "m.onnx")
    plan = write_a_plan(tmp_path / "plan.json", src, (("main", "W1", "fp16"), ("main", "W9", "int10")))
    line = one_error(cli("shrink", str(src), "-o", str(tmp_path / "out"), "--plan", str(plan)))
    assert line == (f"error: {src}: the plan in {plan} names tensor 'W9' in 'main', which the model does not have (the "
                    "plan was edited or made for another model; find one again with `hatch-shrinkray check --search "
                    f"{src} --plan {plan} -- python -m pytest`, or delete its entry)"), line
    assert files_under(tmp_path / "out") == []
    root = write_project(tmp_path / "toymodel")
    save(mlp(), root / MODEL)
    write_a_plan(root / "shrinkray-plan.json", root / MODEL, (("main", "W9", "fp16"),))
    err = hook_build_error(root, tmp_path)
    assert (f"shrinkray: {MODEL}: the plan in shrinkray-plan.json names tensor 'W9' in 'main', which the model does "
            "not have") in err, err
