"""ORT's graph fusions that change what an e-node costs, as the cost model prices them.

ORT rewrites our output before it runs it (ORT_ENABLE_ALL); where a fusion changes the price
of an e-node, the cost model asks here:

- `LayerNormalization(Add(x, s))` becomes `com.microsoft.SkipLayerNormalization`, about 5x
  slower than the pair on ORT 1.32's CPU EP (corpus README): such an Add costs what the fusion
  adds (`skip_layer_norm`).
- `PadFusion` (`pad_fusion.cc`, level 1) folds a constant-mode Pad with constant pads and a zero
  fill into the pads of the Conv or MaxPool that is its only consumer, when that op has no
  `auto_pad` (or NOTSET): such a Pad costs nothing (`pad_fused`). A Conv with `auto_pad=VALID`
  after it (EfficientNet's exports) keeps the Pad, and the NCHWc reorders around it
  (`nchwc.py`).
- `ConvActivationFusion` (level 2, CPU EP) folds a Relu, Clip, LeakyRelu, HardSigmoid, Sigmoid
  or Tanh that is a float Conv's only consumer into `FusedConv`; to the NCHWc layout such an
  activation is part of the Conv (`activation_fused`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np

from rewrite.extract.contrib import MS
from rewrite.extract.snapshot import ENode, Snapshot
from rewrite.extract.target import Target, coeff_key
from rewrite.extract.work import Dims, Work, assume_type, call_work
from rewrite.ops.base import OpCall


class CostModel(Protocol):
    """What the fusion checks read of `cost.CostModel` (a protocol: cost.py imports this
    module)."""

    snapshot: Snapshot
    symbolic: Snapshot
    target: Target
    dims: Dims
    fused: list[str]
    users: dict[int, list[tuple[int, ENode, int]]]
    roots: set[int]
    declared_dims: set[str]

    def call(self, node: ENode) -> OpCall | None: ...

    def cost(self, cid: int, node: ENode) -> float: ...

    def roofline(self, op: str, key: str, work: Work) -> float: ...


def skip_layer_norm(self: CostModel, cid: int, node: ENode) -> float | None:
    """µs of an Add that ORT will fuse with its LayerNormalization consumer, or None.

    ORT (CPU, ORT_ENABLE_ALL) rewrites `LayerNormalization(Add(x, s))` into
    `com.microsoft.SkipLayerNormalization` when x and s are 3-D of one shape as ORT sees it
    (equal dims, or equal dim names that graph inputs declare: ORT's own inference does not
    name dims as ours does, and bert_dynamic's residual Adds, whose dims our inference
    names `unk__2`, are not fused), the Add is not a graph output and
    LayerNormalization (last axis) is its only consumer (checked on ORT 1.32: a second
    consumer, 2-D inputs or a broadcast bias all prevent it). In an
    e-graph "only consumer" means: every e-node that uses the Add's class is in a class
    that holds such a LayerNormalization. The Add is priced as what fusing it adds:
    SkipLayerNormalization minus LayerNormalization (at least the overhead).
    """
    if len(node.children) != 2 or cid in self.roots:
        return None
    sa, sb = (self.symbolic.classes[k].type.shape for k in node.children)
    if sa is None or sa != sb or len(sa) != 3:  # ORT must see equal shapes
        return None
    if any(not isinstance(d, int) and d not in self.declared_dims for d in sa):
        return None  # a dim named by shape inference: ORT's own inference differs
    ta, tb = (assume_type(self.snapshot.classes[k].type, self.dims) for k in node.children)
    if ta is None or tb is None:
        return None
    users = self.users.get(cid, [])
    lns = [(u, n) for u, n, i in users if n.op == "LayerNormalization" and i == 0]
    if not lns or any(u not in {c for c, _ in lns} for u, _, _ in users):
        return None
    ln_cid, ln = lns[0]
    ln_call = self.call(ln)
    if ln_call is None or int(ln_call.attr("axis", -1)) not in (-1, 2):
        return None
    skip = ENode("SkipLayerNormalization", (*node.children, *ln.children[1:]), domain=MS)
    call = replace(ln_call, op_type=skip.op, inputs=[ta, tb, *ln_call.inputs[1:]])
    work = call_work(skip.op, MS, call, [ta])
    if work is None:
        return None
    fused = self.roofline(skip.op, coeff_key(skip, call), work)
    self.fused.append(f"Add in class {cid} + LayerNormalization in class {ln_cid}")
    return max(self.target.overhead * 1e6, fused - self.cost(ln_cid, ln))


def pad_fused(self: CostModel, cid: int, node: ENode) -> bool:
    """Will ORT's PadFusion fold this Pad into its consumer (module doc)?"""
    call = self.call(node)
    if call is None or cid in self.roots or call.attr("mode", "constant") != "constant":
        return False
    if len(call.consts) < 2 or call.consts[1] is None:
        return False
    pads = [int(p) for p in np.asarray(call.consts[1]).reshape(-1)]
    r = len(pads) // 2
    if r < 2 or any(p < 0 for p in pads) or any(pads[i] for i in (0, 1, r, r + 1)):
        return False
    if len(call.inputs) > 2 and call.inputs[2] is not None:
        fill = call.consts[2]
        if (
            fill is None or np.ascontiguousarray(fill).reshape(-1).view(np.uint8).any()
        ):  # ORT: bytes
            return False
    users = self.users.get(cid, [])
    if len({u for u, _, _ in users}) != 1:
        return False
    return all(
        n.op in ("Conv", "MaxPool") and i == 0 and _explicit_pads(self, n) for _, n, i in users
    )


CONV_ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "HardSigmoid", "Sigmoid", "Tanh"})


def activation_fused(self: CostModel, cid: int, node: ENode) -> bool:
    """Will ORT fold this activation into the Conv that feeds it (module doc)?"""
    if node.op not in CONV_ACTIVATIONS or node.domain or not node.children:
        return False
    x = node.children[0]
    if not any(n.op == "Conv" and not n.domain for n in self.snapshot.classes[x].nodes):
        return False
    return x not in self.roots and {u for u, _, _ in self.users.get(x, [])} == {cid}


def _explicit_pads(self: CostModel, node: ENode) -> bool:
    call = self.call(node)
    return call is not None and (call.attr("auto_pad", "NOTSET") or "NOTSET") == "NOTSET"
