"""Random tests of a rule on larger shapes: numpy float64 and ONNX Runtime float32.

For up to `cases` instantiations from the `LARGE` bound (shapes with dims up to 6, the same
attribute enumeration as the proof), `trials` seeded random input sets each (floats
~ N(0, 1) rounded to float32; integers in [-5, 5] without 0, so that integer division is
defined; `is_one` / `is_zero` / `c.value() == k` fix a constant), both sides are computed
(a) with the ops' numpy references in float64 and (b) in ORT float32, one model per side,
graph optimizations off (the typed ops map 1:1 to ONNX nodes). The rule's numeric class:

- `bit-exact`: ORT gives bit-identical outputs for both sides on every sample;
- `exact-in-reals`: not bit-identical in float32, but equal in float64 up to rounding
  (scaled error <= 1e-9): the sides only round differently;
- `approximate`: the float64 results differ: `max_error` is the largest
  |left - right| / max(1, max |right|) over all samples (float64; `max_error_f32` for ORT);
  it is infinite when the sides differ in shape or dtype, the right side is not defined, or
  NaN / Inf appear on one side only;
- `ort-rejects-rhs`: ORT runs the left side of a sample but not the right one (the op's
  shape function accepts what ORT's kernel does not): `notes` gives ORT's error.

A sample whose left side ORT cannot run (e.g. a float-only op on int64) is not a case.

A rule is `within` a tolerance when its float64 `max_error` is at most that tolerance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
from onnx import helper

from rewrite.errors import ShapeError
from rewrite.ops._z3 import is_int
from rewrite.rules.language import App, Call, Cmp, Lit, Term, Var, subterms
from rewrite.rules.rule import Rule
from rewrite.verify.bound import Bound
from rewrite.verify.cases import Case, cases
from rewrite.verify.evaluate import Evaluator, make_call, numpy_backend, spec_of

Array = np.ndarray
BIT_EXACT, EXACT_IN_REALS, APPROXIMATE = "bit-exact", "exact-in-reals", "approximate"
ORT_REJECTS = "ort-rejects-rhs"
REALS_EXACT = 1e-9
APPROX_TOLERANCE = 1e-3
"""Default tolerance of an `approximate` rule (scaled float64 error; see the docstring)."""

LARGE = Bound(
    shapes=(
        (1,), (6,),
        (1, 6), (4, 1), (4, 6), (6, 4),
        (4, 1, 6), (1, 6, 4), (4, 6, 4),
        (1, 4, 1, 6), (4, 1, 6, 1), (4, 6, 1, 4),
    ),
    few=((1,), (6,), (4, 6), (4, 1, 6), (4, 6, 1, 4)),
)  # fmt: skip


@dataclass
class SampleResult:
    numeric: str
    cases: int
    samples: int
    max_error: float
    max_error_f32: float
    seconds: float
    notes: list[str] = field(default_factory=list)

    def within(self, tolerance: float) -> bool:
        return self.cases > 0 and self.max_error <= tolerance


def sample(rule: Rule, *, cases_: int = 6, trials: int = 2, seed: int = 0) -> SampleResult:
    """Random-test `rule` (see the module docstring)."""
    t0 = time.perf_counter()
    pool = list(islice(cases(rule, LARGE), 400))
    step = max(1, len(pool) // cases_)
    chosen = pool[::step][:cases_]
    rng = np.random.default_rng(seed)
    err64 = err32 = 0.0
    bit, rejected = True, False
    n = 0
    notes: list[str] = []
    for case in chosen:
        if not _same_types(case):
            n += 1
            err64 = err32 = float("inf")
            bit = False
            continue
        for _ in range(trials):
            values = _draw(case, rng)
            try:
                e64 = _numpy_error(case, values)
                ort = _ort_error(case, values)
            except _LeftRejectedError:
                break  # the left side is not a model ORT runs (e.g. Gelu of int64): no case
            except (ShapeError, ValueError) as e:
                notes.append(f"numpy: {e}")
                break
            if e64 is None:
                continue
            n += 1
            err64 = max(err64, e64)
            if isinstance(ort, str):
                notes.append(ort)
                rejected = True
                continue
            bit = bit and ort[0]
            err32 = max(err32, ort[1])
    if rejected:
        numeric = ORT_REJECTS
    elif err64 > REALS_EXACT:
        numeric = APPROXIMATE
    elif bit:
        numeric = BIT_EXACT
    else:
        numeric = EXACT_IN_REALS
    if n == 0:
        notes.append("no sample satisfied the rule's guards")
    return SampleResult(
        numeric, len(chosen), n, err64, err32, time.perf_counter() - t0, sorted(set(notes))
    )


def _same_types(case: Case) -> bool:
    """Is the right side defined, with the left side's types?"""
    if case.rhs_error:
        return False
    for lhs, rhs in zip(case.rewrite.lhs, case.rewrite.rhs, strict=True):
        lt, rt = case.types[lhs], case.types.get(rhs) or case.rhs_types[rhs]
        if (lt.dtype, lt.shape) != (rt.dtype, rt.shape):
            return False
    return True


def _fixed_values(case: Case) -> dict[str, float]:
    """Variables that a value guard `v.value() == k` pins to k."""
    out: dict[str, float] = {}
    for g in case.value_guards:
        if isinstance(g, Cmp) and g.op == "==":
            for a, b in ((g.left, g.right), (g.right, g.left)):
                if (
                    isinstance(a, Call)
                    and a.fn == "value"
                    and isinstance(a.args[0], Var)
                    and isinstance(b, Lit)
                ):
                    out[a.args[0].name] = float(b.value)
    return out


def _draw(case: Case, rng: np.random.Generator) -> dict[str, Array]:
    fixed = {**{v: float(k) for v, k in case.facts.items()}, **_fixed_values(case)}
    out: dict[str, Array] = {}
    for v, t in case.tensors.items():
        shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.dtype))
        if v in fixed:
            out[v] = np.full(shape, fixed[v], dtype=dt)
        elif is_int(t.dtype):
            mag = rng.integers(1, 6, size=shape)
            out[v] = (mag * rng.choice([-1, 1], size=shape)).astype(dt)
        else:
            out[v] = rng.normal(0.0, 1.0, size=shape).astype(np.float32).astype(dt)
    return out


def _as64(values: dict[str, Array]) -> dict[str, Array]:
    return {v: a.astype(np.float64) if a.dtype.kind == "f" else a for v, a in values.items()}


def _numpy_error(case: Case, values: dict[str, Array]) -> float | None:
    """Scaled float64 error between the sides; None when a value guard fails."""
    ev = Evaluator(case, _as64(values), numpy_backend)
    for g in case.value_guards:
        if not bool(np.all(ev.expr(g))):
            return None
    err = 0.0
    for lhs, rhs in zip(case.rewrite.lhs, case.rewrite.rhs, strict=True):
        err = max(err, scaled_error(np.asarray(ev.term(lhs)), np.asarray(ev.term(rhs))))
    return err


def scaled_error(a: Array, b: Array) -> float:
    """max |a - b| / max(1, max |b|) over elements finite in both; inf when NaN/Inf differ."""
    if a.shape != b.shape:
        return float("inf")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    fa, fb = np.isfinite(a64), np.isfinite(b64)
    if not np.array_equal(fa, fb) or not np.array_equal(a64[~fa], b64[~fb], equal_nan=True):
        return float("inf")
    if not fa.any():
        return 0.0
    scale = max(1.0, float(np.max(np.abs(b64[fb]))))
    return float(np.max(np.abs(a64[fa] - b64[fb]))) / scale


class _LeftRejectedError(Exception):
    """ORT cannot run the left side: the case is not a model (an unsupported dtype, ...)."""


def _ort_error(case: Case, values: dict[str, Array]) -> tuple[bool, float] | str:
    """(bit-identical, scaled error) of the two sides run in ORT float32, or why ORT cannot
    run the right side (raises `_LeftRejectedError` when it cannot run the left side)."""
    ev = Evaluator(case, _as64(values), numpy_backend)  # for value-level attributes
    same, err = True, 0.0
    for lhs, rhs in zip(case.rewrite.lhs, case.rewrite.rhs, strict=True):
        try:
            left = run_ort(side_model(case, lhs, ev, values), values)
        except Exception as e:  # ORT's errors are plain exceptions
            raise _LeftRejectedError(str(e)) from e
        try:
            right = run_ort(side_model(case, rhs, ev, values), values)
        except Exception as e:
            return f"ORT cannot run the right side: {str(e).splitlines()[0][:300]}"
        same = same and left.dtype == right.dtype and left.tobytes() == right.tobytes()
        err = max(err, scaled_error(left, right))
    return same, err


def side_model(case: Case, root: Term, ev: Evaluator, values: dict[str, Array]) -> bytes:
    """One side of a case as a serialized ONNX model: pattern variables are graph inputs."""
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    names: dict[Term, str] = {}
    used: list[str] = []
    for t in subterms(root):
        if t in names:
            continue
        if isinstance(t, Var):
            names[t] = t.name
            used.append(t.name)
            continue
        assert isinstance(t, App)
        spec = spec_of(t)
        call, consts = make_call(spec, [ev.type_of(c) for c in t.inputs], ev.app_values(t))
        ins: list[str] = []
        kids = iter(names[c] for c in t.inputs)
        for j in range(len(call.inputs)):
            if j in consts:
                cname = f"const{len(inits)}"
                inits.append(onnx.numpy_helper.from_array(consts[j], cname))
                ins.append(cname)
            else:
                ins.append(next(kids))
        out = f"t{len(nodes)}"
        attrs = {k: _attr(v) for k, v in call.attrs.items()}
        nodes.append(helper.make_node(t.op, ins, [out], domain=t.domain, **attrs))
        names[t] = out
    out_t = ev.type_of(root)
    inputs = [
        helper.make_tensor_value_info(v, case.tensors[v].dtype, values[v].shape) for v in used
    ]
    output = helper.make_tensor_value_info(names[root], out_t.dtype, out_t.shape)
    if isinstance(root, Var):  # the side is a bare variable: copy it to an output
        nodes.append(helper.make_node("Identity", [root.name], ["out"]))
        output = helper.make_tensor_value_info("out", out_t.dtype, out_t.shape)
    graph = helper.make_graph(nodes, "side", inputs, [output], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def _attr(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list | tuple):
        return [int(x) for x in v]
    return v


def run_ort(model: bytes, values: dict[str, Array]) -> Array:
    """Run a one-output model on the CPU provider, graph optimizations off."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    feed = {i.name: values[i.name] for i in sess.get_inputs()}
    return np.asarray(sess.run(None, feed)[0])
