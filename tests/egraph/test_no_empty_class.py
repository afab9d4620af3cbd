"""No value vanishes: every value encode binds is an e-class with an e-node the snapshot reads.

A node whose typed form cannot be built (a vector the snapshot cannot read back, such as a
Slice end of INT64_MAX; a non-finite float attribute) is encoded opaque. `take_snapshot`
checks the invariant and names the value and node when it breaks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.egraph.snapshot import EmptyClassError, take_snapshot
from rewrite.onnx_io import Graph, load
from rewrite.rules.fold import fold_constants
from tests.egraph import models as mk
from tests.families import INT64_MAX, llama_decoder
from tests.onnx_io.models import LIGHT

DECODERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "opset17": lambda: llama_decoder(17),
    "opset18": lambda: llama_decoder(18),
    "static": lambda: llama_decoder(17, static=(1, 8)),
    "folded_split": lambda: llama_decoder(17, folded_split=True),
    "opset18_static_folded": lambda: llama_decoder(18, static=(2, 5), folded_split=True),
}


def slice_to_the_end() -> onnx.ModelProto:
    """rotate_half with its split point folded: Slice(x, [2], [INT64_MAX], [-1], [1])."""
    return mk.model(
        [
            h.make_node("Slice", ["x", "half", "end", "axis", "one"], ["x2"], name="slice_hi"),
            h.make_node("Slice", ["x", "zero", "half", "axis", "one"], ["x1"], name="slice_lo"),
            h.make_node("Neg", ["x2"], ["n"], name="neg"),
            h.make_node("Concat", ["n", "x1"], ["y"], name="cat", axis=-1),
        ],
        [mk.vi("x", ["batch", 3, 4])],
        [mk.vi("y", ["batch", 3, 4])],
        inits=[
            mk.const("half", mk.ints(2)),
            mk.const("end", mk.ints(INT64_MAX)),
            mk.const("axis", mk.ints(-1)),
            mk.const("one", mk.ints(1)),
            mk.const("zero", mk.ints(0)),
        ],
    )


def test_slice_with_an_int64_max_end_is_not_a_vector_and_round_trips(tmp_path: Path) -> None:
    """Was: the typed Slice's e-node was dropped by the snapshot, Neg read an empty class.
    An INT64_MAX end cannot be a `VecI`: slice_hi is SliceDyn (its inputs tensor operands)."""
    m = slice_to_the_end()
    rt = mk.roundtrip(m, tmp_path)
    assert rt.enc.opaque_nodes == 0 and rt.enc.typed == 4  # slice_hi SliceDyn, slice_lo Slice
    assert "(SliceDyn " in rt.enc.text and "(Slice " in rt.enc.text
    mk.assert_bit_identical(m, rt.out)


def test_non_finite_float_attribute_is_opaque(tmp_path: Path) -> None:
    """Was: `literal` raised ValueError out of encode for LayerNormalization(epsilon=inf)."""
    m = mk.model(
        [h.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", epsilon=np.inf)],
        [mk.vi("x", [2, 4])],
        [mk.vi("y", [2, 4])],
        inits=[mk.const("s", np.ones(4, np.float32)), mk.const("b", np.zeros(4, np.float32))],
    )
    rt = mk.roundtrip(m, tmp_path)
    assert rt.enc.opaque_nodes == 1 and rt.enc.typed == 0
    mk.assert_bit_identical(m, rt.out)


def test_invariant_names_the_value_and_node_of_a_vanished_class(tmp_path: Path) -> None:
    """A class whose only e-node cannot be read back (what encode used to build for an
    INT64_MAX Slice end) is reported by name instead of failing later in extraction."""
    graph = load(mk.write(slice_to_the_end(), tmp_path))
    enc = encode(graph)
    x = enc.value_vars["x"]
    enc.egraph.parse_and_run_program(
        f"(let $lost (Slice (vec-of 2) (vec-of {INT64_MAX}) (vec-of -1) (vec-of 1) {x}))"
    )
    enc.value_vars["x2"] = "$lost"
    with pytest.raises(EmptyClassError, match=r"'x2' \(output of Slice node 'slice_hi'\)"):
        take_snapshot(enc)


def _assert_no_empty_class(graph: Graph) -> None:
    """Every value read by a node or the graph has a class, and no class is empty."""
    enc = encode(graph)
    snap = take_snapshot(enc)  # raises EmptyClassError on a vanished class
    assert all(c.nodes for c in snap)
    read = {i for n in graph.nodes for i in [*n.inputs, *n.implicit_inputs] if i}
    assert read | set(graph.outputs) <= set(enc.value_vars)


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("fold", [False, True], ids=["as_loaded", "folded"])
def test_decoder_encodes_without_an_empty_class(name: str, fold: bool, tmp_path: Path) -> None:
    graph = load(mk.write(DECODERS[name](), tmp_path))
    if fold:
        graph, _ = fold_constants(graph)
    _assert_no_empty_class(graph)


@pytest.mark.parametrize("path", LIGHT, ids=lambda p: p.stem)
def test_light_model_encodes_without_an_empty_class(path: Path) -> None:
    _assert_no_empty_class(load(path))
