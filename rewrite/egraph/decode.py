"""`Choice` -> Graph': one node per chosen op e-node, in topological order.

Contract: the new graph has the input graph's inputs and outputs (names, order, types);
every class that held an original value keeps that value's name (graph outputs first,
then graph inputs and constants, then the first original name in graph order); a graph output
whose class is computed under another name (an input, a constant, another output) is produced
by an `Identity`; opaque nodes are written back with their original attributes, name and doc
string; constants chosen are written as initializers (the original proto where there was one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewrite.egraph.encode import Encoded
from rewrite.errors import ExtractionError
from rewrite.extract.snapshot import Choice, ENode, Snapshot
from rewrite.onnx_io.graph import Graph, Node
from rewrite.ops.base import np_dtype
from rewrite.ops.parts import node_outputs, part
from rewrite.ops.registry import lookup
from rewrite.ops.topk import topk_node


@dataclass
class _Decoder:
    enc: Encoded
    snap: Snapshot
    choice: Choice
    names: dict[int, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inits: dict[str, onnx.TensorProto] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    counter: int = 0

    def fresh(self, hint: str) -> str:
        while True:
            self.counter += 1
            name = f"rw/{hint}_{self.counter}"
            if name not in self.taken and name not in self.all_original:
                self.taken.add(name)
                return name

    def __post_init__(self) -> None:
        g = self.enc.graph
        self.all_original = set(g.iter_values())
        self.producers = g.producers()
        self.outputs = set(g.outputs)

    # -- naming -------------------------------------------------------------------------
    def name_of(self, cid: int) -> str:
        """The value name of class `cid` (assigned once)."""
        if cid in self.names:
            return self.names[cid]
        node = self.choice.picks[cid]
        cls = self.snap.classes[cid]
        if node.op in ("Input", "Init"):
            name = node.args[0]
        elif node.op == "Absent":
            name = ""
        else:
            candidates = [n for n in cls.names if n not in self.taken]
            outs = [n for n in candidates if n in self.outputs]
            pick = outs[0] if outs else (candidates[0] if candidates else None)
            name = pick if pick is not None else self.fresh(node.op)
        self.taken.add(name)
        self.names[cid] = name
        return name

    # -- emission -----------------------------------------------------------------------
    def emit(self, root: int) -> None:
        """Emit the nodes computing class `root`, children first (iterative post-order)."""
        stack: list[tuple[int, bool]] = [(root, False)]
        on_path: set[int] = set()
        while stack:
            cid, expanded = stack.pop()
            if cid in self.done:
                continue
            if expanded:
                on_path.discard(cid)
                self.emit_class(cid)
                self.done.add(cid)
                continue
            if cid in on_path:
                raise ExtractionError(f"decode: the choice has a cycle through class {cid}")
            if cid not in self.choice.picks:
                raise ExtractionError(f"decode: class {cid} is needed but has no pick")
            on_path.add(cid)
            stack.append((cid, True))
            for k in reversed(self.choice.picks[cid].children):
                if k not in self.done:
                    stack.append((k, False))

    def emit_class(self, cid: int) -> None:
        node = self.choice.picks[cid]
        if node.op == "Init":
            self.add_init(node.args[0])
            self.name_of(cid)
        elif node.op in ("Input", "Absent"):
            self.name_of(cid)
        elif node.op == "Out":
            self.emit_out(cid, node)
        elif self.snap.classes[cid].sort == "N":
            pass  # emitted by the Out classes that read it
        elif node.opaque:
            self.emit_opaque(node, [self.name_of(cid)])
        elif node.op == "SplitPart" and not node.domain:
            self.emit_split(node)
        elif node.op == "TopKPart" and not node.domain:
            self.emit_topk(node)
        elif part(node.op, node.domain) is not None:
            self.emit_part(node)
        elif node.op == "ConstantOfShape" and self.is_new_scalar(cid, node):
            self.emit_scalar(cid, node)
        else:
            self.emit_typed(cid, node)

    def is_new_scalar(self, cid: int, node: ENode) -> bool:
        """A scalar constant a rule created: ConstantOfShape of empty dims, no original name."""
        return not node.domain and not list(node.args[2]) and not self.snap.classes[cid].names

    def emit_scalar(self, cid: int, node: ENode) -> None:
        """A constant a rule created (`rules.scalars`) as an initializer: its value in its
        dtype, shape ()."""
        value, dtype, _ = node.args
        with np.errstate(all="ignore"):
            arr = np.asarray(np.float64(value)).astype(np_dtype(int(dtype)))
        self.names[cid] = self.const_input(arr, "rw/scalar")

    def emit_split(self, node: ENode) -> None:
        """One Split for every chosen `SplitPart` of (x, axis, sizes): the parts' names as
        its outputs, fresh names for pieces no class chose (Split's outputs are required)."""
        axis, sizes, _ = node.args
        key = (node.children[0], axis, tuple(sizes))
        if key in self.splits_done:
            return
        self.splits_done.add(key)
        parts = self.split_parts.get(key, {})
        outs = [
            self.name_of(parts[i]) if i in parts else self.unused_piece((*key, i))
            for i in range(len(sizes))
        ]
        ints = [int(s) for s in sizes]
        inputs = [self.name_of(node.children[0])]
        attrs = [helper.make_attribute("axis", int(axis))]
        if self.enc.graph.opset >= 13:  # `split` is an input from opset 13, an attribute before
            inputs.append(self.const_input(np.asarray(ints, np.int64), f"{outs[0]}/split"))
        else:
            attrs.append(helper.make_attribute("split", ints))
        self.nodes.append(
            Node("Split", inputs, outs, name=self.node_name(outs, None), attributes=attrs)
        )

    def emit_topk(self, node: ENode) -> None:
        """One TopK for the chosen `TopKPart`s of (x, axis, largest, k): their names as its
        outputs, a fresh name for an output no class chose (both are required)."""
        key = (node.children[0], *node.args[:3])
        if key in self.topks_done:
            return
        self.topks_done.add(key)
        parts = self.topk_parts.get(key, {})
        outs = [self.name_of(parts[i]) if i in parts else self.fresh("unused") for i in (0, 1)]
        attrs = dict(zip(("axis", "largest", "k"), node.args[:3], strict=True))
        opset, k = self.enc.graph.opset, np.asarray([int(attrs["k"])], np.int64)
        k_name = self.const_input(k, f"{outs[0]}/k") if opset >= 10 else ""
        proto, _ = topk_node(self.name_of(node.children[0]), outs, attrs, k_name, opset)
        ins, at = list(proto.input), list(proto.attribute)
        self.nodes.append(Node("TopK", ins, outs, name=self.node_name(outs, None), attributes=at))

    def emit_part(self, node: ENode) -> None:
        """One ONNX node for the chosen parts of one (op, attributes, inputs) (`ops.parts`):
        their names as its outputs, outputs no class chose left out (a required one: fresh)."""
        key = self.part_key(node)
        if key in self.parts_done:
            return
        self.parts_done.add(key)
        p = part(node.op, node.domain)
        spec = lookup(node.op, node.domain)
        assert p is not None and spec is not None and spec.egg is not None
        named = {i: self.name_of(c) for i, c in self.part_classes.get(key, {}).items()}
        outs = node_outputs(p, named, lambda: self.fresh("unused"))
        given = {
            a[0]: list(v) if a[1] == "VecI" else v
            for a, v in zip(spec.egg.attrs[:-1], node.args[:-1], strict=True)  # index last
            if v != a[2]
        }
        if spec.egg.from_egg is not None:
            given = spec.egg.from_egg(given)
        attrs = [helper.make_attribute(k, v) for k, v in given.items() if k != "index"]
        inputs = [self.name_of(k) for k in node.children]
        while inputs and not inputs[-1]:
            inputs.pop()
        name = self.node_name([o for o in outs if o], None)
        self.nodes.append(Node(p.op, inputs, outs, name=name, domain=p.domain, attributes=attrs))

    @staticmethod
    def part_key(node: ENode) -> tuple[object, ...]:
        """What the parts of one ONNX node share: op, domain, inputs, attributes but index."""
        args = tuple(tuple(a) if isinstance(a, list) else a for a in node.args[:-1])
        return (node.op, node.domain, tuple(node.children), args)

    def unused_piece(self, piece: tuple[int, int, tuple[int, ...], int]) -> str:
        """The name of a piece no class chose: its original value's when free, else fresh."""
        for name in self.piece_names.get(piece, []):
            if name not in self.taken and name not in self.reserved:
                self.taken.add(name)
                return name
        return self.fresh("unused")

    def emit_out(self, cid: int, node: ENode) -> None:
        ncid = node.children[0]
        if ncid in self.multi:
            return
        op_node = self.choice.picks[ncid]
        n_out = self.snap.opaque[op_node.args[0]].n_outputs
        outs = [""] * n_out
        wanted = self.out_classes.get(ncid, {})
        entry = self.enc.opaque[op_node.args[0]]
        for i in range(n_out):
            if i in wanted:
                outs[i] = self.name_of(wanted[i])
            elif i < len(entry.output_names) and entry.output_names[i]:
                orig = entry.output_names[i]
                # The entry is shared by every node with the same key, and a needed class
                # may hold `orig` under another e-node: such a name is not this output's.
                free = orig not in self.taken and orig not in self.reserved
                outs[i] = orig if free else self.fresh("unused")
                self.taken.add(outs[i])
        self.multi.add(ncid)
        self.emit_opaque(op_node, outs)

    def emit_opaque(self, node: ENode, outputs: list[str]) -> None:
        entry = self.enc.opaque[node.args[0]]
        kids = [self.name_of(k) for k in node.children[: entry.n_inputs]]
        implicit = []
        for k, want in zip(node.children[entry.n_inputs :], entry.implicit_names, strict=True):
            have = self.name_of(k)
            if have != want and want not in self.scoped:
                # the subgraph reads `want` by name: keep it defined (once, for every reader)
                self.scoped.add(want)
                self.nodes.append(Node("Identity", [have], [want], name=self.fresh("scope")))
                self.taken.add(want)
            implicit.append(want)
        self.nodes.append(
            Node(
                entry.op_type,
                kids,
                outputs,
                name=self.node_name(outputs, entry.name),
                domain=entry.domain,
                attributes=list(entry.attributes),
                doc_string=entry.doc_string,
                implicit_inputs=implicit,
            )
        )

    def emit_typed(self, cid: int, node: ENode) -> None:
        spec = lookup(node.op, node.domain)
        assert spec is not None and spec.egg is not None
        sig = spec.egg
        given = {}
        for (aname, sort, default), val in zip(sig.attrs, node.args, strict=False):
            if val != default:
                given[aname] = list(val) if sort == "VecI" else val
        if sig.from_egg is not None:
            given = sig.from_egg(given)
        moved = {}  # attributes this model's opset takes as inputs
        for aname, index, since in sig.attr_inputs:
            if self.enc.graph.opset >= since:
                moved[index] = given.pop(aname, [])
        attrs = [helper.make_attribute(k, v) for k, v in given.items()]
        vecs = iter(node.args[len(sig.attrs) :])
        kids = iter(node.children)
        inputs: list[str] = []
        out = self.name_of(cid)
        for i in range(len(node.children) + len(sig.const_inputs)):  # any arity
            if i in sig.const_inputs:
                arr = np.asarray(next(vecs), dtype=np.int64)
                omit = arr.size == 0 and i in sig.omittable
                inputs.append("" if omit else self.const_input(arr, f"{out}/input{i}"))
            else:
                inputs.append(self.name_of(next(kids)))
        for index, value in sorted(moved.items()):
            inputs += [""] * (index - len(inputs))
            arr = np.asarray(value, dtype=np.int64)
            inputs.insert(index, self.const_input(arr, f"{out}/input{index}") if len(arr) else "")
        while inputs and not inputs[-1]:  # omitted trailing optional inputs
            inputs.pop()
        self.nodes.append(
            Node(
                spec.op_type,  # a second typed form (ReshapeDyn) is written as its ONNX op
                inputs,
                [out],
                name=self.node_name([out], None),
                domain=spec.domain,
                attributes=attrs,
            )
        )

    # -- helpers ------------------------------------------------------------------------
    def node_name(self, outputs: list[str], original: str | None) -> str:
        """The original node's name when it produced the same first output, else a new one."""
        for o in outputs:
            prod = self.producers.get(o)
            if prod is not None and prod.name:
                return prod.name
        return original or self.fresh("node")

    def add_init(self, name: str) -> None:
        if name in self.inits or name in self.enc.graph.input_set:
            return
        proto = self.enc.const_protos.get(name)
        self.inits[name] = (
            proto if proto is not None else numpy_helper.from_array(self.enc.consts[name], name)
        )

    def const_input(self, arr: np.ndarray, hint: str) -> str:
        for name, existing in self.enc.consts.items():
            if (
                existing.dtype == arr.dtype
                and existing.shape == arr.shape
                and np.array_equal(existing, arr)
            ):
                self.add_init(name)
                return name
        name = (
            hint
            if hint not in self.all_original and hint not in self.taken
            else self.fresh("const")
        )
        self.taken.add(name)
        self.enc.consts[name] = arr
        self.add_init(name)
        return name

    def run(self) -> Graph:
        self.multi: set[int] = set()
        self.scoped: set[str] = set()
        self.reserved = {n for c in self.choice.picks for n in self.snap.classes[c].names}
        self.out_classes: dict[int, dict[int, int]] = {}
        self.split_parts: dict[tuple[int, int, tuple[int, ...]], dict[int, int]] = {}
        self.splits_done: set[tuple[int, int, tuple[int, ...]]] = set()
        self.topk_parts: dict[tuple[int, ...], dict[int, int]] = {}
        self.topks_done: set[tuple[int, ...]] = set()
        self.part_classes: dict[tuple[object, ...], dict[int, int]] = {}
        self.parts_done: set[tuple[object, ...]] = set()
        for cid, node in self.choice.picks.items():
            if node.op == "Out":
                self.out_classes.setdefault(node.children[0], {})[node.args[0]] = cid
            elif node.op == "SplitPart" and not node.domain:
                axis, sizes, index = node.args
                key = (node.children[0], axis, tuple(sizes))
                self.split_parts.setdefault(key, {})[index] = cid
            elif node.op == "TopKPart" and not node.domain:
                tkey = (node.children[0], *node.args[:3])
                self.topk_parts.setdefault(tkey, {})[node.args[3]] = cid
            elif part(node.op, node.domain) is not None:
                pkey = self.part_key(node)
                self.part_classes.setdefault(pkey, {})[int(node.args[-1])] = cid
        self.piece_names: dict[tuple[int, int, tuple[int, ...], int], list[str]] = {}
        for cls in self.snap:  # pieces no class chose keep their original names
            for n in cls.nodes:
                if n.op == "SplitPart" and not n.domain and cls.names:
                    piece = (n.children[0], n.args[0], tuple(n.args[1]), n.args[2])
                    self.piece_names.setdefault(piece, cls.names)
        g = self.enc.graph
        self.taken |= set(g.inputs)
        for root in self.choice.roots:
            self.emit(root)
        for out, root in zip(g.outputs, self.choice.roots, strict=True):
            have = self.name_of(root)
            if have != out:
                self.nodes.append(Node("Identity", [have], [out], name=self.fresh("output")))
                self.taken.add(out)
        types = {self.names[c]: self.snap.classes[c].type for c in self.names if self.names[c]}
        for name in g.inputs:
            if name in g.types:
                types[name] = g.types[name]
        return Graph(
            g.header, self.nodes, list(g.inputs), list(g.outputs), self.inits, types, g.path
        )


def decode(enc: Encoded, snap: Snapshot, choice: Choice) -> Graph:
    """The graph that `choice` picks out of the e-graph `enc` was encoded from."""
    return _Decoder(enc, snap, choice).run()
