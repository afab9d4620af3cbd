"""What a model says about the values of a graph input: who consumes it, and the shapes around.

`Uses(model, known=, sizes=)` indexes the consumers of every value (subgraphs included) and
answers from the graph alone, never running it:
- `index_bound(name)`: followed through Cast, Reshape, Unsqueeze, Squeeze, Flatten, Identity,
  Expand, Transpose, Slice, Tile and Concat, wherever the value becomes the indices of Gather,
  GatherElements, GatherND, Scatter, ScatterElements, ScatterND or the ids of com.microsoft
  EmbedLayerNormalization, the size of the indexed axis of the data tensor (the smallest over
  all such uses);
- `value_uses(name)`: the (node, input index) pairs that read the value itself (through
  Identity and Cast), for `input_roles`;
- `dims(name)`: a value's dims (None where unknown), from `known` (the concrete shapes chosen
  for the graph inputs), initializer or Constant dims, declared value_info (symbolic dims
  resolved by `sizes`, name -> size), or ONNX shape inference on a weight-free copy of the
  graph whose inputs have the `known` shapes.
Every question that cannot be answered is None: a malformed graph never raises here.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import helper

# Ops whose output carries (a reshaped, cast or sliced copy of) their first input's values.
_PASS_THROUGH = {
    "Cast": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Identity": (0,),
    "Expand": (0,),
    "Transpose": (0,),
    "Slice": (0,),
    "Tile": (0,),
    "Concat": None,  # every input
}
_SAME_VALUES = {"Identity", "Cast"}
# op -> (indices input index, data input index, "axis" | "nd")
_INDEXING = {
    "Gather": (1, 0, "axis"),
    "GatherElements": (1, 0, "axis"),
    "GatherND": (1, 0, "nd"),
    "ScatterElements": (1, 0, "axis"),
    "Scatter": (1, 0, "axis"),
    "ScatterND": (1, 0, "nd"),
}
# com.microsoft EmbedLayerNormalization: ids input index -> embedding table input index.
_EMBED_LAYER_NORM = {0: 2, 1: 3, 7: 4}
_SMALL_INITIALIZER = 1024  # elements; larger ones become typed inputs for shape inference
Dims = list[int | None]


class Uses:
    """Consumers and shapes of a model's values (see the module docstring)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        known: dict[str, tuple[int, ...]] | None = None,
        sizes: dict[str, int] | None = None,
    ) -> None:
        self._model = model
        self._known = dict(known or {})
        self._sizes = dict(sizes or {})
        self._consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        for node in all_nodes(model.graph):
            for i, name in enumerate(node.input):
                if name:
                    self._consumers.setdefault(name, []).append((node, i))
        self._shapes: dict[str, Dims] = {n: list(s) for n, s in self._known.items()}
        self._inferred = False
        for t in model.graph.initializer:
            self._shapes.setdefault(t.name, list(t.dims))
        for node in all_nodes(model.graph):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for a in node.attribute:
                    if a.name == "value" and node.output:
                        self._shapes.setdefault(node.output[0], list(a.t.dims))
        self._add_value_infos(model.graph)

    def index_bound(self, name: str) -> int | None:
        """Smallest indexed-axis size over every Gather-like use of `name`; None if none known."""
        try:
            found = [b for b in self._index_uses(name) if b is not None]
        except Exception:  # a malformed graph must not stop input generation
            return None
        return min(found) if found else None

    def value_uses(self, name: str) -> Iterator[tuple[onnx.NodeProto, int]]:
        """(node, input index) for every node input that reads `name`'s values, directly or
        through Identity and Cast (standard-domain nodes only)."""
        seen, todo = {name}, [name]
        while todo:
            for node, i in self._consumers.get(todo.pop(), []):
                if node.domain not in ("", "ai.onnx"):
                    continue
                if node.op_type in _SAME_VALUES and node.output and node.output[0] not in seen:
                    seen.add(node.output[0])
                    todo.append(node.output[0])
                else:
                    yield node, i

    def dims(self, name: str) -> Dims | None:
        """The dims of value `name` (None for an unknown dim; None when the rank is unknown)."""
        if not name:
            return None
        if name not in self._shapes and not self._inferred:
            self._inferred = True
            self._infer()
        return self._shapes.get(name)

    def static_dims(self, name: str) -> list[int] | None:
        """`dims(name)` when every dim is known, else None."""
        d = self.dims(name)
        if d is None or any(x is None for x in d):
            return None
        return [int(x) for x in d if x is not None]

    def _index_uses(self, name: str) -> Iterator[int | None]:
        seen, todo = {name}, [name]
        while todo:
            value = todo.pop()
            for node, i in self._consumers.get(value, []):
                op = node.op_type
                if node.domain in ("", "ai.onnx") and op in _INDEXING and i == _INDEXING[op][0]:
                    yield self._axis_size(node, _INDEXING[op])
                elif node.domain == "com.microsoft" and op == "EmbedLayerNormalization":
                    table = _EMBED_LAYER_NORM.get(i)
                    if table is not None and table < len(node.input):
                        yield self._dim(node.input[table], 0)
                elif op in _PASS_THROUGH and node.domain in ("", "ai.onnx"):
                    which = _PASS_THROUGH[op]
                    if which is None or i in which:
                        for out in node.output[:1]:
                            if out and out not in seen:
                                seen.add(out)
                                todo.append(out)

    def _axis_size(self, node: onnx.NodeProto, how: tuple[int, int, str]) -> int | None:
        data = node.input[how[1]]
        attrs = {a.name: a for a in node.attribute}
        if how[2] == "axis":
            return self._dim(data, attrs["axis"].i if "axis" in attrs else 0)
        shape = self.dims(data)
        batch = attrs["batch_dims"].i if "batch_dims" in attrs else 0
        sizes = [d for d in (shape or [])[batch:] if d is not None]
        return min(sizes) if shape and len(sizes) == len(shape) - batch and sizes else None

    def _dim(self, name: str, axis: int) -> int | None:
        shape = self.dims(name)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        return shape[axis]

    def _add_value_infos(self, graph: onnx.GraphProto) -> None:
        """Record declared or inferred dims; a dim already known stays, an unknown one of the
        same rank is filled in."""
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            if not vi.type.tensor_type.HasField("shape"):
                continue
            dims = [
                d.dim_value if d.HasField("dim_value") else self._sizes.get(d.dim_param)
                for d in vi.type.tensor_type.shape.dim
            ]
            had = self._shapes.get(vi.name)
            if had is None:
                self._shapes[vi.name] = dims
            elif len(had) == len(dims):
                self._shapes[vi.name] = [
                    a if a is not None else b for a, b in zip(had, dims, strict=True)
                ]

    def _infer(self) -> None:
        """Run ONNX shape inference on a copy whose large weights are typed inputs instead and
        whose inputs have their `known` shapes (their declared ones if that fails)."""
        for concrete in (True, False):
            try:
                inferred = onnx.shape_inference.infer_shapes(self._light(concrete))
            except Exception:  # shape inference is a best effort
                continue
            self._add_value_infos(inferred.graph)
            return

    def _light(self, concrete: bool) -> onnx.ModelProto:
        g = self._model.graph
        small, big = [], []
        for t in g.initializer:
            if int(np.prod(t.dims)) <= _SMALL_INITIALIZER and t.data_location != 1:
                small.append(t)
            else:
                big.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        inits = {t.name for t in g.initializer}
        inputs = []
        for vi in g.input:
            if vi.name in inits:
                continue
            shape = self._known.get(vi.name)
            if concrete and shape is not None and vi.type.HasField("tensor_type"):
                elem = vi.type.tensor_type.elem_type
                vi = helper.make_tensor_value_info(vi.name, elem, list(shape))
            inputs.append(vi)
        graph = helper.make_graph(list(g.node), g.name or "g", inputs + big, list(g.output), small)
        light = helper.make_model(
            graph, opset_imports=list(self._model.opset_import), functions=self._model.functions
        )
        light.ir_version = self._model.ir_version
        return light


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of its subgraphs (If/Loop/Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from all_nodes(sub)
