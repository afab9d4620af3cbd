"""Counterexamples re-run in ONNX Runtime, and the float check's comparisons.

A counterexample found in the ops' Z3 semantics is only a refutation once ORT, the arithmetic
the rule will run in, shows it too: `ort_outputs` runs both sides of a case (one model per
side, `ort_sides.side_model`; graph optimizations off) on the counterexample's inputs, and
`reproduces` says whether they differ as the claim says they must not:
- `bit-exact` and real-arithmetic claims: the outputs are not bit-identical (NaN = NaN);
- the float check of an `exact` claim: some element is not `agree`-close (`TOLERANCES`:
  |left - right| <= atol·max(1, |left|) + rtol·|left|, NaN and ±inf at the same places,
  integers and booleans equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

from rewrite.rules.language import Term
from rewrite.verify.cases import Case
from rewrite.verify.evaluate import Evaluator, numpy_backend
from rewrite.verify.ort_sides import side_model

Array = np.ndarray
P = onnx.TensorProto
TOLERANCES: dict[int, tuple[float, float]] = {
    P.FLOAT: (1e-4, 1e-5),
    P.FLOAT16: (1e-2, 1e-3),
    P.BFLOAT16: (1e-2, 1e-3),
    P.DOUBLE: (1e-9, 1e-12),
}
"""dtype -> (rtol, atol): the differential check's policy (README), per element."""


def typed_inputs(case: Case, values: dict[str, Any]) -> dict[str, Array]:
    """The counterexample's inputs as arrays of each variable's dtype."""
    out = {}
    for v, t in case.tensors.items():
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.dtype)
        shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
        with np.errstate(all="ignore"):
            if np.dtype(dt).kind in "iu":  # exact: int64 values beyond 2^53 stay whole
                info = np.iinfo(dt)
                span = int(info.max) - int(info.min) + 1
                raw = np.asarray(values[v], dtype=object).reshape(-1)
                whole = [(int(x) - int(info.min)) % span + int(info.min) for x in raw]
                out[v] = np.array(whole, dtype=dt).reshape(shape)
                continue
            out[v] = np.asarray(values[v], dtype=np.float64 if dt != np.bool_ else bool)
            out[v] = out[v].astype(dt).reshape(shape)
    return out


class Sessions:
    """ORT sessions for the sides of one case, built once and run on many inputs."""

    def __init__(self, case: Case, values: dict[str, Array]) -> None:
        self.case = case
        ev = Evaluator(case, _as64(values), numpy_backend)  # value-level attributes
        self.sides: list[tuple[Any, Any]] = []
        for lhs, rhs in zip(case.rewrite.lhs, case.rewrite.rhs, strict=True):
            if lhs == rhs:
                continue
            self.sides.append((_session(case, lhs, ev, values), _session(case, rhs, ev, values)))

    def run(self, values: dict[str, Array]) -> list[tuple[Array, Array | str]] | None:
        """Both sides' outputs per root; None when ORT cannot run a left side (not a case);
        a right side ORT cannot run gives ORT's message."""
        out: list[tuple[Array, Array | str]] = []
        for left, right in self.sides:
            try:
                lo = _run(left, values)
            except Exception:  # ORT's errors are plain exceptions
                return None
            try:
                ro: Array | str = _run(right, values)
            except Exception as e:
                ro = f"ORT cannot run the right side: {str(e).splitlines()[0][:200]}"
            out.append((lo, ro))
        return out


def _as64(values: dict[str, Array]) -> dict[str, Array]:
    return {v: a.astype(np.float64) if a.dtype.kind == "f" else a for v, a in values.items()}


def _session(case: Case, root: Term, ev: Evaluator, values: dict[str, Array]) -> Any:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    model = side_model(case, root, ev, values)
    try:
        return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        return str(e).splitlines()[0][:200]


def _run(sess: Any, values: dict[str, Array]) -> Array:
    if isinstance(sess, str):
        raise RuntimeError(sess)
    feed = {i.name: values[i.name] for i in sess.get_inputs()}
    return np.asarray(sess.run(None, feed)[0])


def bit_identical(a: Array, b: Array) -> bool:
    """Same dtype, shape and values; NaN equals NaN, -0 and +0 differ."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        nan = np.isnan(a) & np.isnan(b)
        same = (a == b) & (np.signbit(a) == np.signbit(b))
        return bool(np.all(nan | same))
    return bool(np.array_equal(a, b))


def agree(left: Array, right: Array, dtype: int) -> Array:
    """Per element: within the dtype's tolerance of `left` (see the module docstring)."""
    if left.shape != right.shape:
        return np.zeros(left.shape, dtype=bool)
    if left.dtype.kind != "f":
        return np.asarray(left == right)
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES[P.FLOAT])
    a, b = left.astype(np.float64), right.astype(np.float64)
    with np.errstate(all="ignore"):
        near = np.abs(a - b) <= atol * np.maximum(1.0, np.abs(a)) + rtol * np.abs(a)
    special = ~np.isfinite(a) | ~np.isfinite(b)
    same_special = (np.isnan(a) & np.isnan(b)) | (a == b)
    return np.where(special, same_special, near)


def reproduces(
    case: Case, values: dict[str, Any], how: str
) -> tuple[bool | None, list[tuple[Any, Any]]]:
    """(does ORT show the difference, both sides' ORT outputs); None: ORT cannot run the
    left side on these inputs. `how`: "bits" (not bit-identical) or "tolerance"."""
    try:
        arrays = typed_inputs(case, values)
        runs = Sessions(case, arrays).run(arrays)
    except (ValueError, TypeError, OverflowError, KeyError):
        return None, []
    if runs is None:
        return None, []
    shown = [(lo.tolist(), ro if isinstance(ro, str) else ro.tolist()) for lo, ro in runs]
    for lo, ro in runs:
        if isinstance(ro, str):
            return True, shown
        if how == "bits" and not bit_identical(lo, ro):
            return True, shown
        out_dtype = onnx.helper.np_dtype_to_tensor_dtype(lo.dtype)
        if how == "tolerance" and not bool(np.all(agree(lo, ro, out_dtype))):
            return True, shown
    return False, shown
