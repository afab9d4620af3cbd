"""The domain a rule was proved on, and the egglog guards that keep its compiled form inside it.

A proof covers a bound (`verify.bound`): ranks up to some R, a set of dtypes per tensor
variable. The compiled rule must not match outside it, or "proved" would say nothing about the
sites it rewrites. `Domain.atoms` gives the query atoms that say so:

- every left-side term (variables and op nodes) has a known shape of rank <= `max_rank`;
- every tensor variable's dtype is one of `dtypes` (empty: any dtype, for rules that only
  move data, whose proof at one dtype holds at all of them); with `same_dtype`, all
  variables share one dtype (the proof never mixed them);
- every left-side `Cast` whose `to` the pattern leaves open casts to one of `cast_to`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnx import TensorProto


@dataclass(frozen=True)
class Domain:
    """Where a proof holds (see the module docstring)."""

    max_rank: int
    dtypes: tuple[int, ...]
    same_dtype: bool = True
    cast_to: tuple[int, ...] = ()
    fixed: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """Variables read by an op input with dtypes of its own (Where's condition) -> those."""

    def describe(self) -> str:
        """`ranks 0-6; float32/float16/int64/int32 (one dtype)`."""
        names = "/".join(dtype_label(d) for d in self.dtypes) or "any dtype"
        same = " (one dtype)" if self.same_dtype and self.dtypes else ""
        return f"ranks 0-{self.max_rank}; {names}{same}"

    def atoms(
        self, variables: Mapping[str, str], nodes: Sequence[str], casts: Sequence[str]
    ) -> list[str]:
        """Query atoms: ranks of `variables` (rule variable -> egglog variable) and `nodes`,
        dtypes of `variables` and of the open-`to` Cast nodes `casts` (egglog variables)."""
        out = [
            f"(<= (vec-length (shape {v})) {self.max_rank})" for v in (*variables.values(), *nodes)
        ]
        own = dict(self.fixed)
        out += [_dtype_in(egg, own[v]) for v, egg in variables.items() if v in own]
        free = [egg for v, egg in variables.items() if v not in own]
        if free and self.dtypes:
            out.append(_dtype_in(free[0], self.dtypes))
            for v in free[1:]:
                out.append(
                    f"(= (dtype {v}) (dtype {free[0]}))"
                    if self.same_dtype
                    else _dtype_in(v, self.dtypes)
                )
        out += [_dtype_in(c, self.cast_to) for c in casts if self.cast_to]
        return out


def _dtype_in(var: str, dtypes: Sequence[int]) -> str:
    mask = sum(1 << d for d in set(dtypes))
    return f"(!= 0 (& (<< 1 (dtype {var})) {mask}))"


def dtype_label(dtype: int) -> str:
    return {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64"}.get(
        dtype, TensorProto.DataType.Name(dtype).lower()
    )
