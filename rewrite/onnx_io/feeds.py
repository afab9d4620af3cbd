"""User inputs in an `.npz`: `load_inputs` reads them and checks them against the model,
`save_inputs` writes them.

Format (`numpy.savez`, read without pickle): one array per tensor input, under the input's
name. A sequence input NAME (or an optional sequence) is its elements under `NAME[0]`,
`NAME[1]`, ...; an empty sequence is one array (its content is not read) under `NAME[]`. An
optional input left out of the file is fed as absent (None). String tensors are stored as
numpy unicode arrays; dtypes numpy does not know (bfloat16, float8, int4) come back from the
file as raw bytes of the same width and are read as the model's dtype.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx

from rewrite.errors import ModelError
from rewrite.onnx_io.inputs import (
    OPTIONAL,
    OPTIONAL_SEQUENCE,
    SEQUENCE,
    Feed,
    ModelLike,
    element_type,
    load_model,
    np_dtype,
    real_inputs,
)

_ITEM = re.compile(r"^(.*)\[(\d*)\]$")


def load_inputs(npz_path: str | os.PathLike[str], model: ModelLike) -> dict[str, Feed]:
    """Read user feeds from an `.npz` (module docstring); ModelError naming the input unless
    they fit `model`: every input given (optional ones may be left out), nothing else, each
    tensor with the input's dtype, rank and static dims (symbolic dims accept any size)."""
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise ModelError(
            f"{npz_path}: cannot read inputs ({e}); give an .npz written by numpy.savez"
        ) from e
    expected = {vi.name: vi for vi in real_inputs(load_model(model))}
    names = ", ".join(repr(n) for n in expected) or "none"
    plain, items = _group(arrays, expected, npz_path, names)
    feeds: dict[str, Feed] = {}
    for name, vi in expected.items():
        container, tt = element_type(vi)
        if container in (SEQUENCE, OPTIONAL_SEQUENCE):
            if name in items:
                feeds[name] = [_checked(npz_path, f"{name}[{i}]", a, tt) for i, a in items[name]]
                continue
        elif name in plain:
            feeds[name] = _checked(npz_path, name, plain[name], tt)
            continue
        if container not in (OPTIONAL, OPTIONAL_SEQUENCE):
            seq = container == SEQUENCE
            hint = f"; a sequence is given as {name}[0], {name}[1], ..." if seq else ""
            raise ModelError(
                f"{npz_path}: input {name!r} is missing (the model needs {names}){hint}"
            )
        feeds[name] = None
    return feeds


def _group(
    arrays: dict[str, np.ndarray],
    expected: dict[str, onnx.ValueInfoProto],
    npz_path: str | os.PathLike[str],
    names: str,
) -> tuple[dict[str, np.ndarray], dict[str, list[tuple[int, np.ndarray]]]]:
    """Split the file's arrays into tensors (by name) and sequence elements (by sequence)."""
    plain: dict[str, np.ndarray] = {}
    items: dict[str, list[tuple[int, np.ndarray]]] = {}
    for key, arr in arrays.items():
        m = _ITEM.match(key)
        if key in expected:
            plain[key] = arr
        elif m and m.group(1) in expected:
            seq = items.setdefault(m.group(1), [])
            if m.group(2):
                seq.append((int(m.group(2)), arr))
        else:
            raise ModelError(f"{npz_path}: input {key!r} is not an input of the model ({names})")
    for name, seq in items.items():
        seq.sort(key=lambda p: p[0])
        if [i for i, _ in seq] != list(range(len(seq))):
            raise ModelError(
                f"{npz_path}: sequence input {name!r} has elements {[i for i, _ in seq]}; "
                f"give {name}[0], {name}[1], ... with no gaps"
            )
    return plain, items


def _checked(
    npz_path: str | os.PathLike[str], name: str, arr: np.ndarray, tt: onnx.TypeProto.Tensor
) -> np.ndarray:
    want = np_dtype(tt.elem_type)
    if want.kind == "O" and arr.dtype.kind in "US":
        arr = arr.astype(object)
    elif arr.dtype.kind == "V" and arr.dtype != want and arr.dtype.itemsize == want.itemsize:
        arr = arr.view(want)
    if arr.dtype != want:
        raise ModelError(
            f"{npz_path}: input {name!r} has dtype {arr.dtype}, the model wants {want}"
        )
    if not tt.HasField("shape"):
        return arr
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
    return arr


def save_inputs(feeds: dict[str, Feed], path: str | os.PathLike[str]) -> Path:
    """Write `feeds` as an `.npz` that `load_inputs` reads back (module docstring); an absent
    optional (None) is left out. Returns the path written (numpy adds `.npz` if missing)."""
    arrays: dict[str, np.ndarray] = {}
    for name, value in feeds.items():
        if value is None:
            continue
        if isinstance(value, list):
            arrays.update({f"{name}[{i}]": _storable(a) for i, a in enumerate(value)})
            if not value:
                arrays[f"{name}[]"] = np.zeros(0, np.float32)
        else:
            arrays[name] = _storable(value)
    p = Path(path)
    np.savez(p, **arrays)  # type: ignore[arg-type]
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


def _storable(a: object) -> np.ndarray:
    """`a` as an array `np.load` reads without pickle (strings as unicode or bytes arrays)."""
    arr = np.asarray(a)
    if arr.dtype != object:
        return arr
    is_bytes = arr.size > 0 and isinstance(arr.reshape(-1)[0], bytes)
    return arr.astype(bytes if is_bytes else str)
