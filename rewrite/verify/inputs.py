"""Seeded model inputs: random feeds for every graph input, and user feeds read from `.npz`.

`make_inputs(model, seed=, dims=)` returns one array per real graph input (initializers listed
as inputs are left out, as are non-tensor inputs). The same model, seed and dims give the same
arrays on every run.

Shapes. A static dim is kept. A symbolic dim named P takes, in order: `dims[P]`; the input's
`shape` in the `corpus.inputs` metadata; `corpus.dims[P]` from the metadata; else a default by
name (case-insensitive): contains "batch" -> 1; contains "seq", "len", "token", "time" or
"past" -> 16; contains "height" or "width" -> 224; any other name -> 2. A dim with neither value
nor name -> 1. The same name gets the same value in every input.

Values. An input with a `corpus.inputs` recipe follows it (`{"shape": [..], "fill": F,
"high": H}` with F one of `randint` in [low=0, high), `ones`, `zeros`, `randn`, `arange`).
Otherwise floats are standard normal and cast to their dtype, and integer and bool inputs go by
name: contains "mask" -> ones, "token_type" or "segment" -> zeros, "position" -> arange along
the last axis; any other integer input is uniform in [0, bound), and any other bool input is a
fair coin. `bound` is found from how the input is used: followed through Cast, Reshape,
Unsqueeze, Squeeze, Flatten, Identity, Expand, Transpose, Slice, Tile and Concat, wherever it
becomes the indices of Gather, GatherElements, GatherND, ScatterElements, ScatterND or the ids
of com.microsoft EmbedLayerNormalization, bound is the size of the indexed axis of the data
tensor (the smallest over all such uses), read from initializer or Constant dims, from declared
value_info, or from ONNX shape inference on a weight-free copy of the graph. Name-based values
are clipped to bound - 1 as well. Without a known bound, integers are drawn from [0, 2). Every
step that cannot tell falls back to these defaults: `make_inputs` never fails on an unknown op
or shape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from rewrite.errors import ModelError

ModelLike = onnx.ModelProto | str | os.PathLike[str]

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


@dataclass(frozen=True)
class InputSpec:
    """One graph input as `make_inputs` fills it: concrete shape, numpy dtype and recipe."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    fill: str  # randint | ones | zeros | randn | arange | coin
    low: int = 0
    high: int = 2


def make_inputs(
    model: ModelLike, *, seed: int = 0, dims: dict[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Seeded random feeds for every real graph input of `model` (see the module docstring)."""
    return sample(input_specs(model, dims=dims), seed)


def sample(specs: list[InputSpec], seed: int) -> dict[str, np.ndarray]:
    """Draw one feed dict from `specs` with `numpy.random.default_rng(seed)`."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for s in specs:
        if s.fill == "ones":
            a = np.ones(s.shape, s.dtype)
        elif s.fill == "zeros":
            a = np.zeros(s.shape, s.dtype)
        elif s.fill == "arange":
            last = s.shape[-1] if s.shape else 1
            ids = np.minimum(np.arange(last), max(s.high - 1, 0))
            a = np.broadcast_to(ids, s.shape).astype(s.dtype) if s.shape else ids[0].astype(s.dtype)
        elif s.fill == "randint":
            high = max(s.high, s.low + 1)
            if s.dtype.kind in "iu":
                high = min(high, int(np.iinfo(s.dtype).max) + 1)
            a = rng.integers(s.low, high, size=s.shape).astype(s.dtype)
        elif s.fill == "coin":
            a = rng.random(s.shape) < 0.5
        elif s.dtype.kind in "OSU":
            a = np.array(rng.choice(["a", "b", "c"], size=s.shape), dtype=object)
        else:
            a = rng.standard_normal(s.shape).astype(s.dtype)
        feeds[s.name] = np.array(a, dtype=s.dtype, order="C")
    return feeds


def input_specs(model: ModelLike, *, dims: dict[str, int] | None = None) -> list[InputSpec]:
    """How `make_inputs` fills each real tensor input of `model`; computed once, sampled often."""
    proto = _load(model)
    meta = {p.key: p.value for p in proto.metadata_props}
    recipes = _json_dict(meta.get("corpus.inputs"))
    corpus_dims = _json_dict(meta.get("corpus.dims"))
    bounds = _IndexBounds(proto)
    specs = []
    for vi in real_inputs(proto):
        tt = vi.type.tensor_type
        dtype = _np_dtype(tt.elem_type)
        recipe = recipes.get(vi.name)
        recipe = recipe if isinstance(recipe, dict) else {}
        shape = _shape(vi, recipe, dims or {}, corpus_dims)
        fill, low, high = _recipe_fill(recipe, dtype)
        if fill is None:
            fill, low, high = _default_fill(vi.name, dtype, bounds)
        specs.append(InputSpec(vi.name, dtype, shape, fill, low, high))
    return specs


def real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are tensors and not initializers (what a caller must feed)."""
    inits = {t.name for t in model.graph.initializer}
    return [
        vi
        for vi in model.graph.input
        if vi.name not in inits and vi.type.WhichOneof("value") == "tensor_type"
    ]


def load_inputs(npz_path: str | os.PathLike[str], model: ModelLike) -> dict[str, np.ndarray]:
    """Read user feeds from an `.npz`; ModelError naming the input unless they fit `model`.

    The file must hold exactly one array per real graph input, each with the input's dtype,
    rank and static dims (symbolic dims accept any size).
    """
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            feeds = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise ModelError(
            f"{npz_path}: cannot read inputs ({e}); give an .npz written by numpy.savez"
        ) from e
    proto = _load(model)
    expected = {vi.name: vi for vi in real_inputs(proto)}
    names = ", ".join(repr(n) for n in expected) or "none"
    for name in feeds:
        if name not in expected:
            raise ModelError(f"{npz_path}: input {name!r} is not an input of the model ({names})")
    for name, vi in expected.items():
        if name not in feeds:
            raise ModelError(f"{npz_path}: input {name!r} is missing (the model needs {names})")
        arr, tt = feeds[name], vi.type.tensor_type
        want = _np_dtype(tt.elem_type)
        if arr.dtype != want:
            raise ModelError(
                f"{npz_path}: input {name!r} has dtype {arr.dtype}, the model wants {want}"
            )
        if arr.ndim != len(tt.shape.dim):
            raise ModelError(
                f"{npz_path}: input {name!r} has rank {arr.ndim} (shape {list(arr.shape)}), "
                f"the model wants rank {len(tt.shape.dim)}"
            )
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value != arr.shape[i]:
                raise ModelError(
                    f"{npz_path}: input {name!r} has shape {list(arr.shape)}, the model wants "
                    f"{d.dim_value} at dim {i}"
                )
    return feeds


def _load(model: ModelLike) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model), load_external_data=False)
    except Exception as e:  # protobuf and OS errors alike: the file is not a model we can read
        raise ModelError(f"{model}: cannot read the ONNX model ({e})") from e


def _json_dict(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _np_dtype(elem_type: int) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return np.dtype(np.float32)


def _shape(vi: onnx.ValueInfoProto, recipe: dict, dims: dict, corpus_dims: dict) -> tuple[int, ...]:
    given = recipe.get("shape")
    out = []
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.dim_param and d.dim_param in dims:
            out.append(int(dims[d.dim_param]))
        elif isinstance(given, list) and i < len(given) and isinstance(given[i], int):
            out.append(given[i])
        elif d.dim_param and isinstance(corpus_dims.get(d.dim_param), int):
            out.append(corpus_dims[d.dim_param])
        else:
            out.append(default_dim(d.dim_param))
    return tuple(out)


def default_dim(name: str) -> int:
    """The size of a symbolic dim nobody gave a value for (see the module docstring)."""
    n = name.lower()
    if not n:
        return 1
    if "batch" in n:
        return 1
    if any(k in n for k in ("seq", "len", "token", "time", "past")):
        return 16
    if "height" in n or "width" in n:
        return 224
    return 2


def _recipe_fill(recipe: dict, dtype: np.dtype) -> tuple[str | None, int, int]:
    fill = recipe.get("fill")
    if fill == "randint":
        return "randint", int(recipe.get("low", 0)), int(recipe.get("high", 2))
    if fill in ("ones", "zeros", "randn"):
        return fill, 0, 2
    if fill == "arange":
        return "arange", 0, int(recipe.get("high", 1 << 62))
    return None, 0, 2


def _default_fill(name: str, dtype: np.dtype, bounds: _IndexBounds) -> tuple[str, int, int]:
    if dtype.kind == "f" or dtype.kind in "OSU" or dtype.kind == "c" or dtype.kind == "V":
        return "randn", 0, 2
    n = name.lower()
    if "mask" in n:
        return "ones", 0, 2
    if "token_type" in n or "segment" in n:
        return "zeros", 0, 2
    if dtype.kind == "b":
        return "coin", 0, 2
    bound = bounds.of(name)
    if "position" in n:
        return "arange", 0, bound if bound is not None else 1 << 62
    return "randint", 0, bound if bound is not None and bound > 0 else 2


class _IndexBounds:
    """Sizes of the axes an input indexes, found by following it to Gather-like consumers."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._model = model
        self._consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        for node in _all_nodes(model.graph):
            for i, name in enumerate(node.input):
                if name:
                    self._consumers.setdefault(name, []).append((node, i))
        self._shapes: dict[str, list[int | None]] = {}
        self._inferred = False
        for t in model.graph.initializer:
            self._shapes[t.name] = list(t.dims)
        for node in _all_nodes(model.graph):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for a in node.attribute:
                    if a.name == "value" and node.output:
                        self._shapes[node.output[0]] = list(a.t.dims)
        self._add_value_infos(model.graph)

    def of(self, name: str) -> int | None:
        """Smallest indexed-axis size over every Gather-like use of `name`; None if none known."""
        try:
            found = [b for b in self._uses(name) if b is not None]
        except Exception:  # a malformed graph must not stop input generation
            return None
        return min(found) if found else None

    def _uses(self, name: str) -> Iterator[int | None]:
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
        shape = self._shape(data)
        batch = attrs["batch_dims"].i if "batch_dims" in attrs else 0
        sizes = [d for d in (shape or [])[batch:] if d is not None]
        return min(sizes) if shape and len(sizes) == len(shape) - batch and sizes else None

    def _dim(self, name: str, axis: int) -> int | None:
        shape = self._shape(name)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        return shape[axis]

    def _shape(self, name: str) -> list[int | None] | None:
        if name not in self._shapes and not self._inferred:
            self._inferred = True
            self._infer()
        return self._shapes.get(name)

    def _add_value_infos(self, graph: onnx.GraphProto) -> None:
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            if vi.name in self._shapes or not vi.type.tensor_type.HasField("shape"):
                continue
            dims = vi.type.tensor_type.shape.dim
            self._shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]

    def _infer(self) -> None:
        """Run ONNX shape inference on a copy whose large weights are typed inputs instead."""
        try:
            g = self._model.graph
            small, big = [], []
            for t in g.initializer:
                if int(np.prod(t.dims)) <= _SMALL_INITIALIZER and t.data_location != 1:
                    small.append(t)
                else:
                    big.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            inits = {t.name for t in g.initializer}
            graph = helper.make_graph(
                list(g.node),
                g.name or "g",
                [vi for vi in g.input if vi.name not in inits] + big,
                list(g.output),
                small,
            )
            light = helper.make_model(
                graph, opset_imports=list(self._model.opset_import), functions=self._model.functions
            )
            light.ir_version = self._model.ir_version
            inferred = onnx.shape_inference.infer_shapes(light)
            self._add_value_infos(inferred.graph)
        except Exception:  # shape inference is a best effort; no bound means the default range
            return


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _all_nodes(sub)


def save_inputs(feeds: dict[str, np.ndarray], path: str | os.PathLike[str]) -> Path:
    """Write `feeds` as an `.npz` that `load_inputs` reads back; returns the path."""
    p = Path(path)
    np.savez(p, **feeds)  # type: ignore[arg-type]
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")
