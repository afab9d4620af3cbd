"""e-graph -> `Snapshot`: read the e-graph out with `freeze()` into plain Python values.

Contract: one `EClass` per canonical e-class of sort T or N; one `ENode` per (non-subsumed)
constructor row; `TCons` lists flattened into the op's children; every class's type from the
shape analysis, completed in Python by the ops' `infer` where egglog had none; each class lists
the original value names it holds; roots are the graph outputs' classes, in order. An e-node
with a vector argument that is not `writable` (a symbolic dim), or of an ai.onnx op newer than
the model's ai.onnx opset (a rule's Gelu, opset 20, in an opset-17 model: `registry.
since_version`), is left out, so extraction never writes a node the model's opset lacks; a
class holding an original value that is left with no e-node raises `EmptyClassError` naming
the value and node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from egglog import bindings

from rewrite.egraph.encode import Encoded
from rewrite.egraph.schema import SYM_BASE, constructors, writable
from rewrite.errors import ShapeError
from rewrite.extract.snapshot import EClass, ENode, OpaqueInfo, Snapshot
from rewrite.ops.base import UNKNOWN, TensorType
from rewrite.ops.registry import lookup, since_version

_TENSOR_SORTS = ("T", "N")


def class_id(v: bindings.Value) -> int:
    """The integer id of an e-class value (egglog prints it as `Value(<id>)`)."""
    return int(str(v)[6:-1])


def take_snapshot(enc: Encoded) -> Snapshot:
    """Freeze the e-graph and build the `Snapshot` (types completed, names attached)."""
    eg = enc.egraph
    frozen = eg.freeze()
    decoders: dict[str, Callable[[bindings.Value], Any]] = {
        "i64": eg.value_to_i64,
        "f64": eg.value_to_f64,
        "String": eg.value_to_string,
        "VecI": lambda v: tuple(eg.value_to_i64(x) for x in eg.value_to_vec(v)),
    }
    classes: dict[int, EClass] = {}
    lists: dict[int, tuple[int, int] | None] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    dtypes: dict[int, int] = {}
    globals_: dict[str, int] = {}
    opaque_rows: list[tuple[int, str, str, str, int, str]] = []
    typed = constructors()
    opset = enc.graph.opset
    too_new = {name for name, s in typed.items() if not s.domain and since_version(s.name) > opset}
    for fname, fn in frozen.functions.items():
        if fn.is_let_binding:
            for row in fn.rows:
                globals_[fname] = class_id(row.output)
            continue
        if fname == "TCons":
            for row in fn.rows:
                lists.setdefault(
                    class_id(row.output), (class_id(row.inputs[0]), class_id(row.inputs[1]))
                )
            continue
        if fname == "TNil":
            for row in fn.rows:
                lists.setdefault(class_id(row.output), None)
            continue
        if fname == "shape":
            for row in fn.rows:
                shapes[class_id(row.inputs[0])] = decoders["VecI"](row.output)
            continue
        if fname == "dtype":
            for row in fn.rows:
                dtypes[class_id(row.inputs[0])] = eg.value_to_i64(row.output)
            continue
        if fn.output_sort not in _TENSOR_SORTS:
            continue
        for row in fn.rows:
            if row.subsumed:
                continue
            cid = class_id(row.output)
            cls = classes.setdefault(cid, EClass(cid, [], sort=fn.output_sort))
            if fname in ("Op", "OpN"):
                dom, op, key = (eg.value_to_string(v) for v in row.inputs[:3])
                opaque_rows.append((cid, dom, op, key, class_id(row.inputs[3]), fname))
                continue
            args: list[Any] = []
            kids: list[int] = []
            for sort, v in zip(fn.input_sorts, row.inputs, strict=True):
                if sort in _TENSOR_SORTS:
                    kids.append(class_id(v))
                else:
                    args.append(decoders[sort](v))
            if any(isinstance(a, tuple) and not writable(a) for a in args):
                continue  # a vector built from a symbolic dim cannot be written back to ONNX
            if fname in too_new:
                continue  # the model's opset has no such op
            spec = typed.get(fname)
            op, domain = (spec.name, spec.domain) if spec is not None else (fname, "")
            cls.nodes.append(ENode(op, tuple(kids), tuple(args), domain=domain))
    for cid, dom, op, key, tl, _ in opaque_rows:
        kids = _flatten(lists, tl)
        classes[cid].nodes.append(ENode(op, tuple(kids), (key,), domain=dom, opaque=True))

    for cls in classes.values():  # an e-node whose child has no row of its own is unusable
        cls.nodes = [n for n in cls.nodes if all(k in classes for k in n.children)]
    snap = Snapshot(classes, [], consts=enc.consts)
    snap.opaque = {
        k: OpaqueInfo(_attrs_of(e.attributes), e.n_inputs, e.n_outputs)
        for k, e in enc.opaque.items()
    }
    for value, var in enc.value_vars.items():  # a class with no row stays, empty, for the check
        classes.setdefault(globals_[var], EClass(globals_[var], [])).names.append(value)
    snap.roots = [globals_[enc.value_vars[o]] for o in enc.graph.outputs]
    for cid, cls in classes.items():
        if cid in shapes or cid in dtypes:
            shape = shapes.get(cid)
            cls.type = TensorType(
                dtypes.get(cid, 0),
                None if shape is None else tuple(_dim(d, enc.symbols) for d in shape),
            )
    complete_types(snap)
    check_no_empty_class(enc, snap)
    return snap


class EmptyClassError(RuntimeError):
    """An e-class that holds a value of the graph has no e-node: a bug of ours, never the
    model's (encode must fall back to an opaque node for anything it cannot type)."""


def check_no_empty_class(enc: Encoded, snap: Snapshot) -> None:
    """Raise `EmptyClassError` naming the value and its node if a value's class has no e-node.

    Invariant: every value encode bound (graph inputs, constants, every node output) is an
    e-class with at least one e-node the snapshot could read; otherwise extraction would fail
    far from the cause ("root class has no e-node of finite cost").
    """
    lost = [v for c in snap if not c.nodes for v in c.names]
    if not lost:
        return
    producer = {o: n for n in enc.graph.nodes for o in n.outputs if o}
    where = []
    for v in lost[:5]:
        n = producer.get(v)
        where.append(f"{v!r} (output of {n.op_type} node {n.name!r})" if n else repr(v))
    more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
    raise EmptyClassError(
        f"e-graph invariant broken: the e-class of {', '.join(where)}{more} has no e-node "
        "the snapshot can read (its typed form was not writable)"
    )


def _flatten(lists: dict[int, tuple[int, int] | None], tl: int) -> list[int]:
    out: list[int] = []
    cur: int | None = tl
    while cur is not None:
        cell = lists.get(cur)
        if cell is None:
            break
        out.append(cell[0])
        cur = cell[1]
    return out


def _dim(d: int, symbols: dict[int, str | None]) -> int | str | None:
    return d if d < SYM_BASE else symbols.get(d - SYM_BASE)


def _attrs_of(attributes: list[Any]) -> dict[str, Any]:
    from rewrite.onnx_io.graph import Node

    return Node("", [], [], attributes=attributes).attrs


def complete_types(snap: Snapshot) -> None:
    """Give a type to every op class egglog left untyped, from its e-nodes' `infer`."""
    changed = True
    while changed:
        changed = False
        for cls in snap:
            if cls.sort != "T" or (cls.type.shape is not None and cls.type.dtype):
                continue
            for node in cls.nodes:
                t = _infer(snap, node)
                if t is not None and t.shape is not None:
                    cls.type = t
                    changed = True
                    break


def _infer(snap: Snapshot, node: ENode) -> TensorType | None:
    if node.op == "Out":
        return None
    call = snap.call(node)
    if call is None or any(t is not None and t.shape is None for t in call.inputs):
        return None
    spec = lookup(node.op, node.domain)
    if spec is None:
        return None
    try:
        outs = spec.infer(call)
    except (ShapeError, ValueError, TypeError, IndexError, KeyError):
        return None
    return outs[0] if outs else UNKNOWN
