"""Targets: the numbers the roofline prices with, and which calibration key an e-node uses.

A `Target` is a machine + ORT execution provider as `cost.py` sees it. `CPU` and `CUDA` are
built at import by `load_target`: this machine's calibration (`rewrite calibrate`, found by
`table.find_table`), else the shipped default table (cpu), else the built-in constants; a
missing, corrupt or mismatched table never fails the import. `coeff_key` names the
calibration entry of an e-node: its op, plus a variant where ORT runs a different kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rewrite.extract.snapshot import ENode
from rewrite.extract.table import CalibrationTable, find_table
from rewrite.ops.base import OpCall
from rewrite.ops.registry import lookup

GEMM_OPS = frozenset(
    {
        "MatMul",
        "Gemm",
        "Conv",
        "ConvTranspose",
        "FusedMatMul",
        "FusedGemm",
        "FusedConv",
        "MatMulInteger",
        "QLinearMatMul",
        "QLinearConv",
        "Attention",
        "MultiHeadAttention",
    }
)
"""Ops that run at the target's GEMM throughput (`peak_flops`)."""

BROADCAST_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "Where", "PRelu"})
"""Ops whose ORT kernels take a slower loop when a non-scalar input is broadcast."""


@dataclass(frozen=True)
class Target:
    """A machine + execution provider, as the roofline sees it.

    `peak_flops` (FLOP/s) applies to `GEMM_OPS`, `vector_flops` (FLOP/s) to all other ops;
    `bandwidth` (bytes/s) to activations, which a model reads soon after writing them (cache),
    `mem_bandwidth` (bytes/s) to constant inputs (weights), which a model reads once per run
    (memory); `overhead` is the fixed cost of one ORT node dispatch or kernel launch (s).
    `coeffs` multiplies an op's roofline time by `coeff_key` (default 1; calibration fills it).
    `source` says where the numbers came from (a table's path, or the built-in constants).
    """

    name: str
    peak_flops: float
    vector_flops: float
    bandwidth: float
    overhead: float
    coeffs: Mapping[str, float] = field(default_factory=dict)
    source: str = "built-in constants"
    mem_bandwidth: float = 0.0
    """0 = same as `bandwidth`."""

    def coeff(self, key: str) -> float:
        """Multiplier of a cost key; a variant (`Conv:grouped`) falls back to its op's.

        `Sum` of two inputs runs Add's kernel: it is priced as Add plus 0.1%, so that it is
        chosen only where it changes what ORT fuses (an Add that ORT would fuse into
        SkipLayerNormalization), never on calibration noise (and an Add that ORT fuses into
        BiasGelu stays an Add)."""
        if key.split(":", 1)[0] == "Sum":
            return self.coeff(key.replace("Sum", "Add", 1)) * 1.001
        if key in self.coeffs:
            return self.coeffs[key]
        return self.coeffs.get(key.split(":", 1)[0], 1.0)

    @property
    def weight_bandwidth(self) -> float:
        return self.mem_bandwidth or self.bandwidth


BUILTIN_CPU = Target(
    name="cpu",
    peak_flops=85e9,
    vector_flops=8e9,
    bandwidth=10e9,
    overhead=2e-6,
    # Ops with scattered or strided access run below streaming bandwidth.
    coeffs={"Transpose": 1.5, "Gather": 1.5, "ScatterND": 2.0, "Softmax": 1.5},
)
"""Uncalibrated numbers for ORT's CPU EP on a few cores (fp32); used only if no table loads."""

BUILTIN_CUDA = Target(
    name="cuda",
    peak_flops=20e12,
    vector_flops=2e12,
    bandwidth=1.0e12,
    overhead=8e-6,
    coeffs={"Transpose": 1.5, "Gather": 1.5, "ScatterND": 2.0, "Softmax": 1.5},
)
"""Uncalibrated numbers for ORT's CUDA EP on a datacenter GPU (fp32/TF32)."""

_BUILTIN = {"cpu": BUILTIN_CPU, "cuda": BUILTIN_CUDA}


def target_from_table(table: CalibrationTable, source: str = "") -> Target:
    """The `Target` a calibration table describes."""
    return Target(
        name=table.key.target,
        peak_flops=table.peak_flops,
        vector_flops=table.vector_flops,
        bandwidth=table.bandwidth,
        mem_bandwidth=table.mem_bandwidth,
        overhead=table.overhead,
        coeffs=dict(table.coeffs),
        source=source or f"calibration {table.key.slug()}",
    )


def load_target(name: str = "cpu", threads: int = 1) -> Target:
    """Target `name` with the best table there is (`table.find_table`: `$REWRITE_COST_TABLE`,
    the user cache, the shipped default), else the built-in constants. Never raises for a bad
    or missing file; raises ValueError for an unknown target name."""
    if name not in _BUILTIN:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(_BUILTIN)}")
    table, note = find_table(name, threads)
    if table is None:
        return replace(_BUILTIN[name], source=note)
    return target_from_table(table, note)


CPU = load_target("cpu")
"""ORT CPU EP, 1 intra-op thread: this machine's calibration, else the shipped default table."""

CUDA = load_target("cuda")
"""ORT CUDA EP: this machine's calibration, else the built-in constants."""

TARGETS = {t.name: t for t in (CPU, CUDA)} | {"portable": CPU}
"""Cost model per `--target`. `portable` (any ONNX runtime) is priced as the CPU EP, the one
runtime we can time here; what makes it portable is what may be written (`cost.standard_only`
and the `portable` rule tag)."""


def coeff_key(node: ENode, call: OpCall | None, const_b: bool = True) -> str:
    """The calibration key of an e-node: its op, domain-qualified outside ai.onnx
    (`com.microsoft.Gelu`), plus a variant where ORT runs another kernel: `Conv:grouped`
    (group > 1: depthwise convolutions run far below GEMM speed), `MatMul:activations` and
    `com.microsoft.FusedMatMul:activations` (B is not a constant, so ORT cannot pre-pack it:
    attention's QKᵀ and PV), and `Add:broadcast` etc. (`BROADCAST_OPS` with two non-scalar
    inputs of different shapes). `const_b`: whether input 1 is a constant. A second typed
    form (ReshapeDyn) is keyed as the ONNX op ORT runs (`OpSpec.op_type`)."""
    spec = lookup(node.op, node.domain) if not node.opaque else None
    op = spec.op_type if spec is not None else node.op
    key = op if node.domain in ("", "ai.onnx") else f"{node.domain}.{op}"
    if call is None:
        return key
    if node.op == "Conv" and int(call.attr("group", 1) or 1) > 1:
        return f"{key}:grouped"
    if node.op in ("MatMul", "FusedMatMul") and not const_b:
        return f"{key}:activations"
    if node.op in BROADCAST_OPS and _broadcasts(call):
        return f"{key}:broadcast"
    return key


def _broadcasts(call: OpCall) -> bool:
    """True when two non-scalar inputs differ in shape (after left-padding with 1s)."""
    shapes = [t.shape for t in call.inputs if t is not None and t.shape is not None]
    full = [s for s in shapes if any(d != 1 for d in s)]
    if len(full) < 2:
        return False
    rank = max(len(s) for s in full)
    return len({(1,) * (rank - len(s)) + tuple(s) for s in full}) > 1
