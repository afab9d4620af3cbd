"""Lower precision per op under an error budget (`optimize --precision auto --max-error E`).

Opt-in only: without `--precision auto` every rewrite stays exact. The pass runs on the
exact output after it passed the differential check:

1. `forms.py`: the low-precision forms and where each applies (an approximate rewrite with
   its error model; int8 dynamic quantization of MatMul/Gemm with constant weights).
2. `kernels.py`: what each form saves on the target, timed in ORT at the op's shapes (cached
   per CPU ISA, ORT version, provider and threads).
3. `sensitivity.py`: each candidate's error, measured by lowering it alone on calibration
   inputs; `metrics.py` holds the error metrics (maxrel, cosine, top1).
4. `select.py`: a HiGHS MIP picks the candidates that save the most while, for every output,
   the sum of their measured errors stays within the budget.
5. `lower.py`: the end-to-end check on held-back inputs, the budget tightened and the choice
   repeated when it is exceeded (bounded), else the exact graph.
"""
