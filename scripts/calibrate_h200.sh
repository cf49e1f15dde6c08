#!/usr/bin/env bash
# Regenerates results/h200/2026-12-02/calibration/ from the stored H200 results (no GPU needed):
# the calibrated profile, the gap report (Markdown and JSON, with its energy section) and its figures, and
# the energy parameters fitted on the measured energy windows (energy-fit.json, a calibration profile with
# only an energy section; profile.json carries the same section fitted with the torchref results: the calibrated layer;
# hwspecs/specs/h200-sxm.yaml holds the energy probe's measured values). Inputs: the default
# suites of 2026-12-02 and the #13 suites of 2026-12-03 (more shapes per group; calls 1 and 2 of
# results/h200/2026-12-03/achievable, measured on another machine of the same kind) and the matched-pairs
# and block-shape call of 2026-12-03 (results/h200/2026-12-03/pairs-blocks: attention, SSD, the Mamba-1
# scan, blocks at smaller widths and short sequences; see its README), and the FlashAttention-3 call of
# 2026-12-03 (results/h200/2026-12-03/fa3: FA3, SDPA cuDNN and flash at the pairs' attention points),
# and the calls that gave every group of 1-4 shapes new ones (results/h200/2026-12-03/fill; its README), and
# the op-level calls of 2026-12-04 (recheck-mamba3-step, strided-gate, ssd-graph, vim-scan, conv-unaligned;
# their READMEs), and the calls of 2026-12-05 (results/h200/2026-12-05/norm-rope: the norms and RoPE;
# conv-fwdbwd: causal-conv1d's forward-backward calls measured again; norm-graph: the norms' forward-backward
# as CUDA-graph replays; kernel-audit-fill: the op groups left with 1-4 shapes filled to six or more, and the three
# kernels of the ncu audit timed again; eager-dtypes-mamba3-fill: the eager softmax and norms in fp16 and fp32,
# and the Mamba-3 block's training step at five more shapes).
set -euo pipefail
cd "$(dirname "$0")/.."
IN=results/h200/2026-12-02
MORE=results/h200/2026-12-03/achievable
PAIRS=results/h200/2026-12-03/pairs-blocks
FA3=results/h200/2026-12-03/fa3
FILL=results/h200/2026-12-03/fill
RECHECK=results/h200/2026-12-04/recheck-mamba3-step  # supersedes the fill's eager Mamba-3 decode steps
# mamba-ssm's GatedMLP gate (strided halves) and the chunked SSD at the Mamba-2 models' shapes as graph replays
GATE=results/h200/2026-12-04/strided-gate
SSDG=results/h200/2026-12-04/ssd-graph
VIM=results/h200/2026-12-04/vim-scan  # the selective scan and conv1d at uneven lengths (the vision model's)
CONV=results/h200/2026-12-04/conv-unaligned  # causal-conv1d at lengths that are not a multiple of its load
NORM=results/h200/2026-12-05/norm-rope  # mamba-ssm's Triton norms (backward row loop, gated norm) and the eager RoPE
CONVFB=results/h200/2026-12-05/conv-fwdbwd  # causal-conv1d's forward-backward calls measured again
NORMG=results/h200/2026-12-05/norm-graph  # the Triton norms' forward-backward as CUDA-graph replays
FILLG=results/h200/2026-12-05/kernel-audit-fill  # small groups filled to six shapes; the audited kernels again
DTYPES=results/h200/2026-12-05/eager-dtypes-mamba3-fill  # eager softmax and norms in fp16 / fp32; the Mamba-3 block's training step at five more shapes
# every folder above for the time calibration and the gap report; the energy fit reads all but calibration-torchref
RESULTS=("$IN/default" "$IN/calibration-torchref" "$MORE/call1" "$MORE/call2" "$PAIRS" "$FA3" "$FILL" "$RECHECK" "$GATE"
         "$SSDG" "$VIM" "$CONV" "$NORM" "$CONVFB" "$NORMG" "$FILLG" "$DTYPES")
ENERGY_RESULTS=()
for d in "${RESULTS[@]}"; do [ "$d" = "$IN/calibration-torchref" ] || ENERGY_RESULTS+=("$d"); done
OUT=$IN/calibration
mkdir -p "$OUT"
ssmbench calibrate --results "${RESULTS[@]}" --hw h200-sxm --out "$OUT/profile.json" --force
ssmbench gap --results "${RESULTS[@]}" --hw h200-sxm --calibration "$OUT/profile.json" \
    --format md --out "$OUT/gap.md" --plot "$OUT/gap.png" --energy-plot "$OUT/energy.png"
ssmbench gap --results "${RESULTS[@]}" --hw h200-sxm --calibration "$OUT/profile.json" \
    --format json --out "$OUT/gap.json"
ssmbench energy-fit --results "${ENERGY_RESULTS[@]}" --hw h200-sxm --out "$OUT/energy-fit.json" --force > /dev/null
rm -f "$OUT/energy-fit.yaml"  # the measured: fragment that energy-fit wrote before it wrote a profile
