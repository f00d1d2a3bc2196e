"""``dedup``: identical tensors (dtype, shape, bytes) stored once; lossless.

Exporters write tied or shared weights (ALBERT's shared layers, repeated subgraph constants)
as separate copies. Copies may sit in different graphs; the one kept lives in the innermost graph
that encloses all of them (so every copy can see it), and each former copy becomes an
``Identity`` of it under its old name, which keeps every name and interface intact.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from onnx import ModelProto, NodeProto, TensorProto, helper

from hatch_shrinkray.methods.base import DataFree
from hatch_shrinkray.onnxgraph.encoding import Calibration
from hatch_shrinkray.onnxgraph.graph import Names, Scope, Site, find_sites
from hatch_shrinkray.onnxgraph.rewrite import record
from hatch_shrinkray.options import ShrinkOptions
from hatch_shrinkray.result import TensorRecord

MIN_BYTES = 1024


def _key(site: Site) -> tuple[int, tuple[int, ...], str] | None:
    t = site.tensor
    if t.data_location == TensorProto.EXTERNAL or not t.raw_data:
        if site.size * 4 < MIN_BYTES:
            return None
        data = site.array().tobytes()
    else:
        data = t.raw_data
    return None if len(data) < MIN_BYTES else (site.dtype, site.shape, hashlib.sha256(data).hexdigest())


def _common_scope(sites: list[Site]) -> Scope:
    chains = [list(reversed(s.scope.ancestors())) for s in sites]
    common = chains[0][0]
    for level in zip(*chains, strict=False):
        if all(sc is level[0] for sc in level):
            common = level[0]
        else:
            break
    return common


class Dedup(DataFree):
    name = "dedup"

    def apply(self, model: ModelProto, options: ShrinkOptions,
              calibration: Calibration | None = None) -> list[TensorRecord]:
        groups: dict[tuple[int, tuple[int, ...], str], list[Site]] = defaultdict(list)
        for site in find_sites(model):
            key = _key(site)
            if key is not None:
                groups[key].append(site)
        names = Names(model)
        records: list[TensorRecord] = []
        prologues: dict[int, tuple[Scope, list[NodeProto]]] = {}
        dropped: dict[int, set[str]] = defaultdict(set)
        for members in groups.values():
            if len(members) < 2:
                continue
            home = _common_scope(members)
            keeper = next((s for s in members if s.scope is home and s.location == "initializer"), None)
            if keeper is None:
                source = names.fresh(f"{members[0].name}_shared")
                shared = TensorProto()
                shared.CopyFrom(members[0].tensor)
                shared.name = source
                home.graph.initializer.append(shared)
            else:
                source = keeper.name
            for site in members:
                if site is keeper:
                    continue
                identity = helper.make_node("Identity", [source], [site.name],
                                            name=names.fresh(f"{site.name}_dedup"))
                if site.location == "constant":
                    assert site.node is not None
                    site.node.CopyFrom(identity)
                else:
                    dropped[id(site.scope)].add(site.name)
                    prologues.setdefault(id(site.scope), (site.scope, []))[1].append(identity)
                records.append(record(site, f"dedup -> {source}", stored=0))
        for scope, nodes in prologues.values():
            graph = scope.graph
            for i in reversed(range(len(graph.initializer))):
                if graph.initializer[i].name in dropped[id(scope)]:
                    del graph.initializer[i]
            for offset, node in enumerate(nodes):
                graph.node.insert(offset, node)
        return records
