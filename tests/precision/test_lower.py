"""`precision.lower`: the pass end to end on models built in code, in real ORT sessions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from rewrite.onnx_io.feeds import save_inputs
from rewrite.precision.lower import Config, feed_sets, lower_model
from rewrite.precision.metrics import errors
from rewrite.precision.sensitivity import run
from tests.precision.models import mlp


def _saved(m: onnx.ModelProto, tmp_path: Path, name: str = "m.onnx") -> Path:
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


def test_a_budget_no_op_meets_leaves_the_model_exact(tmp_path: Path) -> None:
    src = _saved(mlp((256, 512, 256), rows=64), tmp_path)
    got = lower_model(src, src, Config(max_error=1e-9, kernel_table=tmp_path / "k.json"))
    assert got.model is None
    assert got.report["result"].startswith("exact")
    assert got.report["candidates"] == 2 and got.report["forms"] == [
        "int4_block",
        "int8_block",
        "int8_dynamic",
    ]
    paying = got.report["measured_sensitivities"]
    assert 2 <= paying <= 6  # every form that saves time at these shapes


def test_the_stated_error_is_what_an_independent_run_of_both_models_shows(
    tmp_path: Path,
) -> None:
    src = _saved(mlp((256, 512, 512, 256), rows=64, outputs=2), tmp_path)
    cfg = Config(max_error=0.05, kernel_table=tmp_path / "k.json")
    got = lower_model(src, src, cfg)
    assert got.model is not None, got.report
    rep = got.report
    assert len(rep["changed"]) >= 1 and rep["result"].startswith("lowered")
    assert "seeded random" in rep["inputs"] and "4 held back" in rep["inputs"]
    # independent: the same held-back sets, both models in fresh sessions
    _, held, _ = feed_sets(src, cfg)
    ref = run(onnx.load(str(src)), held)
    out = run(got.model, held)
    independent = errors("maxrel", ref, out)
    assert set(independent) == {"y0", "y1"}
    for k, v in independent.items():
        assert v <= cfg.max_error
        assert abs(v - rep["error"]["held_back"][k]) <= 1e-3 * v + 1e-12
    for c in rep["changed"]:
        assert (
            c["form"] in ("int8_dynamic", "int8_block", "int4_block")
            and c["low_us"] < c["exact_us"]
        )
        assert set(c["sensitivity"]) == {"y0", "y1"}


def test_kernel_timings_are_cached_per_isa_ort_and_threads(tmp_path: Path) -> None:
    src = _saved(mlp((256, 512, 256), rows=64), tmp_path)
    cfg = Config(max_error=1e-9, kernel_table=tmp_path / "k.json")
    first = lower_model(src, src, cfg).report["kernels"]
    again = lower_model(src, src, cfg).report["kernels"]
    assert first["measured_now"] == 6 and again["measured_now"] == 0  # 2 ops x 3 forms
    assert "ort " in first["key"] and "|1t|" in first["key"]


def test_user_calibration_sets_are_used_and_every_other_one_is_held_back(tmp_path: Path) -> None:
    src = _saved(mlp((256, 512, 256), rows=64), tmp_path)
    rng = np.random.default_rng(5)
    files = []
    for i in range(3):
        x = rng.standard_normal((64, 256)).astype(np.float32)
        files.append(str(save_inputs({"x": x}, tmp_path / f"c{i}.npz")))
    cal, held, how = feed_sets(src, Config(max_error=0.1, calibration=tuple(files)))
    assert len(cal) == 2 and len(held) == 1 and how.startswith("3 user set(s)")
    one, same, how1 = feed_sets(src, Config(max_error=0.1, calibration=(files[0],)))
    assert one == same and "also the held-back set" in how1


def test_the_budget_can_be_in_cosine_or_top1(tmp_path: Path) -> None:
    src = _saved(mlp((256, 512, 256), rows=64), tmp_path)
    for metric, budget in (("cosine", 1e-3), ("top1", 0.2)):
        cfg = Config(max_error=budget, metric=metric, kernel_table=tmp_path / "k.json")
        got = lower_model(src, src, cfg)
        assert got.model is not None and got.report["metric"] == metric
        _, held, _ = feed_sets(src, cfg)
        independent = errors(metric, run(onnx.load(str(src)), held), run(got.model, held))
        assert independent["y"] <= budget


def test_understated_sensitivities_are_tightened_from_the_choices_estimate(
    tmp_path: Path,
) -> None:
    """Sensitivities that understate the combined error a thousandfold (ops' errors
    compound): the first choice (every op) fails end to end, and scaling the budget alone
    would keep choosing it; tightening from the choice's own estimate finds a subset within
    the budget instead of giving up (gpt2_decode with calibration files: exact before)."""
    from rewrite.precision.forms import candidates, lower
    from rewrite.precision.lower import Priced, _choose

    model = mlp((256, 512, 512, 256), rows=64)
    cfg = Config(max_error=1.0, kernel_table=tmp_path / "k.json")
    cal, held, _ = feed_sets(_saved(model, tmp_path), cfg)
    ref_cal, ref_held = run(model, cal), run(model, held)
    cands = [c for c in candidates(model) if c.form == "int8_dynamic"]

    def worst(chosen: list) -> float:
        low = lower(model, chosen)
        both = [*errors("maxrel", ref_cal, run(low, cal)).values()]
        return max([*both, *errors("maxrel", ref_held, run(low, held)).values()])

    alone = {c.key: worst([c]) for c in cands}
    every = worst(cands)
    assert every > max(alone.values()), "more lowered ops, more error"
    budget = (every + max(alone.values())) / 2  # all ops exceed it, the best one alone fits
    sens = {k: {"y": e / 1000} for k, e in alone.items()}
    saving = {c.key: 10.0 for c in cands}
    timed = {c.key: (20.0, 10.0) for c in cands}
    rep: dict = {"candidates": len(cands)}
    cfg = Config(max_error=budget, kernel_table=tmp_path / "k.json")
    priced = Priced(saving, timed, [])
    got = _choose(model, cands, ({}, {}), priced, sens, (cal, ref_cal), (held, ref_held), cfg, rep)
    assert got.model is not None, rep["rounds"]
    assert rep["rounds"][0]["chosen"] == len(cands) and not rep["rounds"][0]["within_budget"]
    assert 1 <= len(rep["changed"]) < len(cands)
    assert max(rep["error"]["held_back"].values()) <= budget
