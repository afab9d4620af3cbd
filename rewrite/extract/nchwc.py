"""ORT's NCHWc layout on the CPU EP: which values it blocks, and the reorders that costs.

On x86 CPUs with AVX2 or AVX-512 (MLAS's NCHWc block of 8 or 16 channels), ORT at
ORT_ENABLE_ALL rewrites eligible 2-D Convs and pools into a blocked-channel layout
(`nchwc_transformer.cc`): a Conv whose weights are a constant float 4-D tensor [M, C/g, kh, kw]
with M a multiple of the block and C either below the block (it reads the plain input) or a
multiple of it (grouped: depthwise with M = g, or C and M/g multiples of the block), and a
constant or absent 1-D bias; MaxPool/AveragePool over float [N, C, H, W] with C a multiple of the
block. Relu, Sigmoid, Tanh, Add, Sum, Mul, Concat, BatchNormalization, Transpose, Resize and
the global pools stay blocked when all their inputs are. Every other op that reads a blocked
value gets a `ReorderOutput` in front of it, and a blocked Conv or pool reading a plain value
(C at least the block) a `ReorderInput`. Each reorder copies the tensor.

`NchwcLayout.extra(cid, node)` is the µs of the reorders an e-node causes, as the cost model
adds them: an op outside the blocked set pays for reordering its blocked inputs, a blocked
Conv or pool pays for reordering a plain input. A `Pad` between two Convs so pays two copies on
top of its own (EfficientNet-B0's five Pads: measured 1.12x faster once folded into the Convs,
where their own copies are 3% of the run). Which class holds a blocked value is decided on the
e-graph: a class is blocked if any of its e-nodes produces a blocked value (the extractor may
then choose another of its e-nodes; the estimate is per e-node, not per chosen graph).
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from functools import cache

from rewrite.extract.snapshot import ENode, Snapshot
from rewrite.ops.base import OpCall, TensorType

FLOAT = 1
BLOCKED_ELEMENTWISE = frozenset(
    {"Relu", "Sigmoid", "Tanh", "Add", "Sum", "Mul", "Concat", "BatchNormalization"}
    | {"Transpose", "Resize", "Upsample", "GlobalAveragePool", "GlobalMaxPool"}
)
"""Ops ORT keeps in NCHWc when every input is (their own NCHWc kernels)."""
POOLS = frozenset({"MaxPool", "AveragePool"})


@cache
def block_size() -> int:
    """MLAS's NCHWc block on this CPU: 16 with AVX-512, 8 with AVX2, 0 without NCHWc."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "").split()
    except OSError:
        return 0
    return 16 if "avx512f" in flags else 8 if "avx2" in flags else 0


class NchwcLayout:
    """The blocked classes of one snapshot and the reorder cost of each e-node (module doc)."""

    def __init__(
        self,
        snapshot: Snapshot,
        call: Callable[[ENode], OpCall | None],
        constants: set[int],
        copy_us: Callable[[TensorType], float],
        block: int,
        fused_away: Callable[[int, ENode], bool] = lambda cid, node: False,
    ) -> None:
        self.snapshot = snapshot
        self._call = call
        self._constants = constants
        self._copy_us = copy_us
        self.block = block
        self._fused_away = fused_away
        """An e-node ORT removes by fusing it into its consumer (a Pad into a Conv): its
        class holds what its data input holds."""
        self.blocked: set[int] = self._blocked_classes() if block else set()

    def extra(self, cid: int, node: ENode) -> float:
        """µs of the reorders ORT inserts around `node` in class `cid` (0 if none)."""
        if not self.blocked or node.domain or not node.children:
            return 0.0
        if self._fused_away(cid, node):
            return 0.0  # part of its consumer or producer as ORT runs it
        kids = [k for k in node.children if k not in self._constants]
        if self._reads_blocked(node):  # a blocked Conv or pool: its plain input is reordered
            x = node.children[0]
            if x in self.blocked or not self._reorders_input(node):
                return 0.0
            return self._copy_us(self.snapshot.classes[x].type)
        if node.op in BLOCKED_ELEMENTWISE and kids and all(k in self.blocked for k in kids):
            return 0.0
        return sum(self._copy_us(self.snapshot.classes[k].type) for k in kids if k in self.blocked)

    # -- which values are blocked ----------------------------------------------------------
    def _blocked_classes(self) -> set[int]:
        blocked: set[int] = set()
        changed = True
        while changed:  # a fixpoint: elementwise ops extend the blocked set through the graph
            changed = False
            for cls in self.snapshot:
                if cls.id in blocked:
                    continue
                if any(self._produces_blocked(cls.id, n, blocked) for n in cls.nodes):
                    blocked.add(cls.id)
                    changed = True
        return blocked

    def _produces_blocked(self, cid: int, node: ENode, blocked: set[int]) -> bool:
        if node.domain:
            return False
        if node.children and self._fused_away(cid, node):
            return node.children[0] in blocked
        if self._reads_blocked(node):
            return True
        if node.op not in BLOCKED_ELEMENTWISE:
            return False
        kids = [k for k in node.children if k not in self._constants]
        return bool(kids) and all(k in blocked for k in kids)

    def _reads_blocked(self, node: ENode) -> bool:
        """Is `node` a Conv or pool that ORT runs in NCHWc?"""
        if node.op == "Conv":
            return self._conv_geometry(node) is not None
        if node.op in POOLS and node.children:
            t = self.snapshot.classes[node.children[0]].type
            return _is_4d_float(t) and _channels(t) % self.block == 0
        return False

    def _reorders_input(self, node: ENode) -> bool:
        return node.op != "Conv" or self._conv_geometry(node) is True

    def _conv_geometry(self, node: ENode) -> bool | None:
        """Whether a Conv that ORT blocks reorders its input (a single-group Conv with fewer
        input channels than the block reads the plain input as it is); None if ORT does not
        block it."""
        if len(node.children) < 2 or node.children[1] not in self._constants:
            return None
        w = self.snapshot.classes[node.children[1]].type
        if not _is_4d_float(w) or not all(isinstance(d, int) for d in w.shape or ()):
            return None
        if len(node.children) > 2:
            b = self.snapshot.classes[node.children[2]]
            if not any(n.op == "Absent" for n in b.nodes) and b.id not in self._constants:
                return None
        call = self._call(node)
        group = int(call.attr("group", 1)) if call is not None else 1
        m, c = int(w.shape[0]), int(w.shape[1])  # type: ignore[index, arg-type]
        k = self.block
        if m % k:
            return None
        if group > 1:
            depthwise = c == 1 and m == group
            if not depthwise and (c % k or m % group or (m // group) % k):
                return None
            return True
        if c >= k and c % k:
            return None
        return c >= k


def _is_4d_float(t: TensorType) -> bool:
    return t.dtype == FLOAT and t.shape is not None and len(t.shape) == 4


def _channels(t: TensorType) -> int:
    c = t.shape[1] if t.shape else None
    return c if isinstance(c, int) and c > 0 else -1
