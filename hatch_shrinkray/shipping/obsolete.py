"""The original's external-data files that a shrunk model no longer reads leave the archive,
unless a model that ships its original bytes still reads them (then they stay, said so)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hatch_shrinkray.errors import ShrinkrayError
from hatch_shrinkray.shipping import wording
from hatch_shrinkray.shipping.datafiles import Readers
from hatch_shrinkray.shipping.display import Display
from hatch_shrinkray.shipping.outcome import Shipped


def drop_obsolete_data(shipped: list[Shipped], sidecars_of: Mapping[str, tuple[str, ...]], readers: Readers,
                       app: Display) -> list[Shipped]:
    """Each shrunk model's original data files, marked obsolete (left out of the archive) unless
    a model that ships its original bytes (not configured, passed through, unchanged) reads them;
    a shipped file that would take such a data file's place is refused."""
    replaced = {s.relpath for s in shipped if s.new_bytes}
    kept_as_is = {s.relpath for s in shipped if not s.new_bytes}
    out = []
    for model in shipped:
        obsolete, written = [], {rel for rel, _ in model.files}
        for rel in sorted(written - {model.relpath} if model.new_bytes else ()):
            clash = sorted(readers.of(rel) - replaced)
            if clash:
                raise ShrinkrayError(f"the shrunk model's data file {rel} would replace the file of that name, which "
                                     f"{clash[0]} reads", path=model.relpath,
                                     hint=f"configure {clash[0]} too, or rename its data file")
        for data in sidecars_of.get(model.relpath, ()):
            still = sorted(readers.of(data) - replaced)
            if still:
                app.display_warning(wording.data_stays_line(model.relpath, data, readers.tree.size(data), still,
                                                            configured=still[0] in kept_as_is))
            elif data not in written:
                obsolete.append(data)
        if obsolete:
            app.display_info(wording.left_out_line(model.relpath, [(d, readers.tree.size(d)) for d in obsolete],
                                                   sorted(written - {model.relpath})))
        out.append(replace(model, obsolete=tuple(obsolete)))
    return out
