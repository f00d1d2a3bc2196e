"""The plan file's say in a build: the options a model ships with when ``check`` left a plan for
its bytes, and whether what ships is the model ``check`` accepted."""

from __future__ import annotations

from dataclasses import replace

from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.config import HookConfig, ModelEntry
from hatch_shrinkray.shipping.display import Display
from hatch_shrinkray.shipping.plan import PLAN_NAME, PlanEntry


def planned(config: HookConfig, model: ModelEntry, sha256: str, app: Display) -> tuple[ModelEntry, PlanEntry | None]:
    """``model`` with the plan the plan file holds for these bytes, if any (a plan found for other
    bytes of the same path means the model changed since: said, and not applied)."""
    name = config.plan_file.name if config.plan_file is not None else PLAN_NAME
    plan = config.plans.get(sha256)
    if plan is None:
        stale = [p for p in config.plans.values() if p.model == model.relpath]
        if stale:
            app.display_warning(wording.stale_plan_line(model.relpath, name, model.options.method, stale[0]))
        return model, None
    if plan.remedy is not None:  # the model's line names it (``wording.success_line``, ``fix_line``)
        return replace(model, options=plan.apply(model.options)), plan
    app.display_info(wording.plan_line(model.relpath, name, plan))
    return replace(model, options=plan.apply(model.options)), plan


def confirm_plan(relpath: str, plan: PlanEntry, shipped_sha256: str, app: Display) -> None:
    """Say whether these bytes are the very model ``check`` accepted."""
    accepted = plan.checked.get("shrunk_sha256")
    if accepted == shipped_sha256:
        app.display_success(wording.accepted_line(relpath, plan))
    elif accepted:
        app.display_warning(wording.not_accepted_line(relpath, plan))
    else:
        app.display_warning(wording.unrecorded_acceptance_line(relpath, plan))
