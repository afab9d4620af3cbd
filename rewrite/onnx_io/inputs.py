"""Seeded model inputs: random feeds for every graph input that a caller must feed.

`make_inputs(model, seed=, dims=)` returns one value per real graph input (initializers listed
as inputs are left out): an array for a tensor input, a list of `SEQUENCE_LENGTH` arrays for a
sequence of tensors, and for an optional input its element (always present). Map and sparse
inputs are left out. The same model, seed and dims give the same values on every run.

Shapes. A static dim is kept. A symbolic dim named P takes, in order: `dims[P]`; the input's
`shape` in the `corpus.inputs` metadata; `corpus.dims[P]` from the metadata; else a default by
name (case-insensitive): contains "batch" -> 1; contains "seq", "len", "token", "time" or
"past" -> 16; contains "height" or "width" -> 224; any other name -> 2. A dim with neither value
nor name -> 1. The same name gets the same value in every input. A tensor without a declared
shape is a scalar.

Values. An input with a `corpus.inputs` recipe follows it (`{"shape": [..], "fill": F,
"high": H}` with F one of `randint` in [low=0, high), `ones`, `zeros`, `randn`, `arange`).
Otherwise what the model says about the input's valid values decides (`input_roles`): a shape,
size, axis or scale that an op reads from it is drawn valid for the op's other inputs and its
declared output (Reshape's and Expand's shape, Resize's scales and sizes, Slice's axes and
steps, Split's sizes, ...), an integer divisor (Div, Mod) is nonzero, a threshold in [0, 1)
where the op requires it. Otherwise floats are standard normal and cast to their dtype, and
integer and bool inputs go by name: contains "mask" -> ones, "token_type" or "segment" ->
zeros, "position" -> arange along the last axis; any other integer input is uniform in
[0, bound), and any other bool input is a fair coin. `bound` is the size of the axis the input
indexes (`input_uses.Uses.index_bound`: Gather-like consumers, followed through casts and
reshapes). Name-based values are clipped to bound - 1 as well. Without a known bound, integers
are drawn from [0, 2). Every step that cannot tell falls back to these defaults: `make_inputs`
never fails on an unknown op or shape. Values a model cannot run on remain possible (a check
drops such a feed set: `verify.differential`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from rewrite.errors import ModelError
from rewrite.onnx_io.input_roles import Recipe, recipe_for
from rewrite.onnx_io.input_uses import Uses

ModelLike = onnx.ModelProto | str | os.PathLike[str]
Feed = np.ndarray | list[np.ndarray] | None
"""One input's value: a tensor, a sequence of tensors, or an absent optional (None)."""
SEQUENCE_LENGTH = 2
"""Elements in a generated sequence input."""
TENSOR, SEQUENCE, OPTIONAL, OPTIONAL_SEQUENCE = "tensor", "sequence", "optional", "optional_seq"


@dataclass(frozen=True)
class InputSpec:
    """One graph input as `make_inputs` fills it: concrete shape, numpy dtype and recipe.

    For a sequence (or optional) input, `dtype` and `shape` are its elements'; `container`
    says which (TENSOR, SEQUENCE, OPTIONAL or OPTIONAL_SEQUENCE). `value` is the flat content
    of a `const` fill."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    fill: str  # randint | ones | zeros | randn | arange | coin | unit | const
    low: int = 0
    high: int = 2
    value: tuple[float, ...] | None = None
    container: str = TENSOR


def make_inputs(
    model: ModelLike, *, seed: int = 0, dims: dict[str, int] | None = None
) -> dict[str, Feed]:
    """Seeded random feeds for every real graph input of `model` (see the module docstring)."""
    return sample(input_specs(model, dims=dims), seed)


def sample(specs: list[InputSpec], seed: int) -> dict[str, Feed]:
    """Draw one feed dict from `specs` with `numpy.random.default_rng(seed)`."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, Feed] = {}
    for s in specs:
        if s.container in (SEQUENCE, OPTIONAL_SEQUENCE):
            feeds[s.name] = [_draw(s, rng) for _ in range(SEQUENCE_LENGTH)]
        else:
            feeds[s.name] = _draw(s, rng)
    return feeds


def _draw(s: InputSpec, rng: np.random.Generator) -> np.ndarray:
    if s.fill == "ones":
        a = np.ones(s.shape, s.dtype)
    elif s.fill == "zeros":
        a = np.zeros(s.shape, s.dtype)
    elif s.fill == "const":
        a = np.asarray(s.value, dtype=np.float64).reshape(s.shape)
    elif s.fill == "unit":
        a = rng.random(s.shape)
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
    return np.array(a, dtype=s.dtype, order="C")


def input_specs(model: ModelLike, *, dims: dict[str, int] | None = None) -> list[InputSpec]:
    """How `make_inputs` fills each real input of `model`; computed once, sampled often."""
    proto = load_model(model)
    meta = {p.key: p.value for p in proto.metadata_props}
    recipes = _json_dict(meta.get("corpus.inputs"))
    corpus_dims = {k: int(v) for k, v in _json_dict(meta.get("corpus.dims")).items() if _is_int(v)}
    inputs = real_inputs(proto)
    shapes: dict[str, tuple[int, ...]] = {}
    sizes: dict[str, int] = {}  # every symbolic dim name -> the size it was given
    for vi in inputs:
        recipe = recipes.get(vi.name)
        given = recipe.get("shape") if isinstance(recipe, dict) else None
        shapes[vi.name] = _shape(element_type(vi)[1], given, dims or {}, corpus_dims, sizes)
    tensors = {vi.name for vi in inputs if element_type(vi)[0] in (TENSOR, OPTIONAL)}
    uses = Uses(proto, known={n: s for n, s in shapes.items() if n in tensors}, sizes=sizes)
    specs = []
    for vi in inputs:
        container, tt = element_type(vi)
        dtype = np_dtype(tt.elem_type)
        recipe = recipes.get(vi.name)
        found = _recipe_fill(recipe if isinstance(recipe, dict) else {})
        if found is None and container == TENSOR:
            found = recipe_for(uses, vi.name, shapes[vi.name], dtype)
        if found is None:
            found = _default_fill(vi.name, dtype, uses)
        fill, low, high = found.fill, found.low, found.high
        spec = InputSpec(vi.name, dtype, shapes[vi.name], fill, low, high, found.value, container)
        specs.append(spec)
    return specs


def real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs a caller must feed: not initializers, and tensors, sequences of tensors or
    optional tensors or sequences (`element_type` reads them)."""
    inits = {t.name for t in model.graph.initializer}
    return [
        vi
        for vi in model.graph.input
        if vi.name not in inits and element_type(vi)[0] != ""
    ]  # fmt: skip


def element_type(vi: onnx.ValueInfoProto) -> tuple[str, onnx.TypeProto.Tensor]:
    """(container, the tensor type of the input or of its elements); container "" when the
    input is none of TENSOR, SEQUENCE, OPTIONAL, OPTIONAL_SEQUENCE."""
    t = vi.type
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return TENSOR, t.tensor_type
    if kind == "sequence_type" and t.sequence_type.elem_type.HasField("tensor_type"):
        return SEQUENCE, t.sequence_type.elem_type.tensor_type
    if kind == "optional_type":
        inner = t.optional_type.elem_type
        if inner.HasField("tensor_type"):
            return OPTIONAL, inner.tensor_type
        if inner.HasField("sequence_type") and inner.sequence_type.elem_type.HasField(
            "tensor_type"
        ):
            return OPTIONAL_SEQUENCE, inner.sequence_type.elem_type.tensor_type
    return "", onnx.TypeProto.Tensor()


def load_model(model: ModelLike) -> onnx.ModelProto:
    """`model` itself, or the model at that path without its external data; ModelError if the
    file cannot be read."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model), load_external_data=False)
    except Exception as e:  # protobuf and OS errors alike: the file is not a model we can read
        raise ModelError(f"{model}: cannot read the ONNX model ({e})") from e


def np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type (float32 where numpy has none)."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return np.dtype(np.float32)


def _json_dict(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape(
    tt: onnx.TypeProto.Tensor,
    given: object,
    dims: dict[str, int],
    corpus_dims: dict[str, int],
    sizes: dict[str, int],
) -> tuple[int, ...]:
    """The concrete shape of a tensor type (the module docstring's order); each symbolic dim's
    size is recorded in `sizes` (the first one seen for a name)."""
    out = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            out.append(d.dim_value)
            continue
        if d.dim_param in dims:
            out.append(int(dims[d.dim_param]))
        elif isinstance(given, list) and i < len(given) and _is_int(given[i]):
            out.append(given[i])
        elif d.dim_param in corpus_dims:
            out.append(corpus_dims[d.dim_param])
        else:
            out.append(default_dim(d.dim_param))
        if d.dim_param:
            sizes.setdefault(d.dim_param, out[-1])
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


def _recipe_fill(recipe: dict) -> Recipe | None:
    fill = recipe.get("fill")
    if fill == "randint":
        return Recipe("randint", int(recipe.get("low", 0)), int(recipe.get("high", 2)))
    if fill in ("ones", "zeros", "randn"):
        return Recipe(fill)
    if fill == "arange":
        return Recipe("arange", 0, int(recipe.get("high", 1 << 62)))
    return None


def _default_fill(name: str, dtype: np.dtype, uses: Uses) -> Recipe:
    if dtype.kind in "fOSUcV":
        return Recipe("randn")
    n = name.lower()
    if "mask" in n:
        return Recipe("ones")
    if "token_type" in n or "segment" in n:
        return Recipe("zeros")
    if dtype.kind == "b":
        return Recipe("coin")
    bound = uses.index_bound(name)
    if "position" in n:
        return Recipe("arange", 0, bound if bound is not None else 1 << 62)
    return Recipe("randint", 0, bound if bound is not None and bound > 0 else 2)
