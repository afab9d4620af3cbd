"""The sides of a rule's case as ONNX models, run in ONNX Runtime (CPU, optimizations off).

`side_model(case, root, ev, values)` writes one side as a model whose inputs are the pattern
variables; `run_ort(model, values)` runs a one-output model once; `Sides(case, ev, values)`
holds one session per rewrite root and side, built once per case and run on many input sets
(`run(values)` -> per root pair (left, right) outputs, or the side ORT refuses and why).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from rewrite.ops.parts import node_outputs, part
from rewrite.ops.registry import opset_for
from rewrite.ops.split import split_part_node
from rewrite.ops.topk import part_outputs, topk_node
from rewrite.rules.language import Absent, App, Term, Var, subterms
from rewrite.rules.scalars import is_scalar_term
from rewrite.verify.cases import Case
from rewrite.verify.evaluate import Evaluator, make_call, spec_of

Array = np.ndarray


def side_model(case: Case, root: Term, ev: Evaluator, values: dict[str, Array]) -> bytes:
    """One side of a case as a serialized ONNX model: pattern variables are graph inputs; the
    ai.onnx opset is `registry.BASE_OPSET`, or the first that has every op of the side when
    one is newer (Mish: 18, Gelu: 20)."""
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    names: dict[Term, str] = {}
    used: list[str] = []
    for t in subterms(root):
        if t in names:
            continue
        if isinstance(t, Absent):
            names[t] = ""
            continue
        if isinstance(t, Var):
            names[t] = t.name
            used.append(t.name)
            continue
        assert isinstance(t, App)
        spec = spec_of(t)
        call, consts = make_call(spec, [ev.type_of(c) for c in t.inputs], ev.app_values(t))
        if is_scalar_term(t) and t != root:  # a rule's new constant: an initializer
            names[t] = f"const{len(inits)}"
            value = spec.reference(call, [consts[0]])[0]  # type: ignore[misc]
            inits.append(onnx.numpy_helper.from_array(np.asarray(value), names[t]))
            continue
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
        attrs = {  # an empty vector stands for an attribute left out (Conv's pads)
            k: _attr(v)
            for k, v in call.attrs.items()
            if not (isinstance(v, list | tuple) and not v)
        }
        if spec.egg is not None and spec.egg.from_egg is not None:
            attrs = spec.egg.from_egg(attrs)
        if spec.name == "SplitPart" and not spec.domain:  # one output of an ONNX Split
            node, sizes = split_part_node(ins[0], out, call.attrs, f"const{len(inits)}")
            nodes.append(node)
            inits.append(sizes)
        elif spec.name == "TopKPart" and not spec.domain:  # one output of an ONNX TopK
            outs = part_outputs(out, int(call.attrs["index"]))
            node, k = topk_node(ins[0], outs, dict(call.attrs), f"const{len(inits)}", 17)
            assert k is not None  # K is an input at opset 17
            nodes.append(node)
            inits.append(k)
        elif (p := part(spec.name, spec.domain)) is not None:  # one output of `ops.parts`
            outs = node_outputs(p, {int(call.attrs["index"]): out}, _named(f"{out}/unused"))
            attrs.pop("index", None)
            nodes.append(helper.make_node(p.op, ins, outs, domain=p.domain, **attrs))
        else:
            nodes.append(helper.make_node(spec.op_type, ins, [out], domain=t.domain, **attrs))
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
    opset = opset_for((n.op_type, n.domain) for n in nodes)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def _named(name: str) -> Callable[[], str]:
    """Fresh output names: `name`, then `name`1, `name`2, ... (one per call)."""
    count = itertools.count()
    return lambda: f"{name}{next(count) or ''}"


def _attr(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list | tuple):
        return [int(x) for x in v]
    return v


def session(model: bytes) -> Any:
    """An ORT session on the CPU provider, graph optimizations off, one thread."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def _feed(sess: Any, values: dict[str, Array]) -> dict[str, Array]:
    return {i.name: values[i.name] for i in sess.get_inputs()}


def run_ort(model: bytes, values: dict[str, Array]) -> Array:
    """Run a one-output model on the CPU provider, graph optimizations off."""
    sess = session(model)
    return np.asarray(sess.run(None, _feed(sess, values))[0])


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


class LeftRejectedError(Exception):
    """ORT cannot run the left side: the case (or input set) is not a model ORT runs."""


@dataclass
class Outcome:
    """ORT's outputs of both sides for one input set: `pairs` (left, right) per rewrite root,
    or `right_error` when ORT refuses the right side (at load or at run time)."""

    pairs: list[tuple[Array, Array]]
    right_error: str = ""


class Sides:
    """Sessions for every (left, right) root pair of a case, built once."""

    def __init__(self, case: Case, ev: Evaluator, values: dict[str, Array]) -> None:
        rw = case.rewrite
        self.left: list[Any] = []
        self.right: list[Any] = []
        self.right_error = ""
        for lhs, rhs in zip(rw.lhs, rw.rhs, strict=True):
            try:
                self.left.append(session(side_model(case, lhs, ev, values)))
            except Exception as e:  # ORT's errors are plain exceptions
                raise LeftRejectedError(first_line(e)) from e
            try:
                self.right.append(session(side_model(case, rhs, ev, values)))
            except Exception as e:
                self.right_error = f"ORT cannot load the right side: {first_line(e)}"

    def run(self, values: dict[str, Array]) -> Outcome:
        """Both sides on `values`; LeftRejectedError when the left side fails on them."""
        lefts = []
        for s in self.left:
            try:
                lefts.append(np.asarray(s.run(None, _feed(s, values))[0]))
            except Exception as e:
                raise LeftRejectedError(first_line(e)) from e
        if self.right_error:
            return Outcome([], self.right_error)
        pairs = []
        for s, left in zip(self.right, lefts, strict=True):
            try:
                pairs.append((left, np.asarray(s.run(None, _feed(s, values))[0])))
            except Exception as e:
                return Outcome([], f"ORT cannot run the right side: {first_line(e)}")
        return Outcome(pairs)
