#!/usr/bin/env bash
# The multi-GPU device call of issue #18, for a node with N >= 2 GPUs (nvidia-h200-x8 for TP 2, 4, 8).
# Run from the repository root with $OUT set; ~6 minutes on 8 H200s. Writes:
#   $OUT/multigpu.log                       everything printed
#   $OUT/collectives-<N>gpu.yaml            probe --collectives over all N GPUs (NCCL): per collective the
#                                           time and bus bandwidth per size, and the fitted latency and bus
#                                           bandwidth as measured: entries for `specs new --probe`
#   $OUT/tp/<block>-tp<T>.json              one TP block timed on T = 1, 2, 4, 8 GPUs (<= N) beside its
#                                           prediction: codestral-mamba-7b's Mamba-2 block and llama-3-8b's
#                                           attention + MLP layer, prefill B=1 L=4096 bf16
#   $OUT/sharded-1gpu/, sharded-<N>gpu/     the same 54 SDPA cases of default_h200_a measured on 1 GPU and
#                                           sharded over N (measure --distributed): cases per second of each
#   a summary table at the end: TP ratio measured / predicted and the median error; sharded scaling.
# Environment: PY (default python3), SEQLEN (default 4096), HW (the prediction's spec, default h200-sxm).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/device_lib.sh
begin_call multigpu.log "multi-GPU call (issue #18)"
install_python_parts
HW=${HW:-h200-sxm}
SEQLEN=${SEQLEN:-4096}
N=$(nvidia-smi -L | wc -l)
say "GPUs on this node: $N"
[ "$N" -ge 2 ] || { say "needs at least 2 GPUs"; end_call; exit 2; }
TORCHRUN=("$PY" -m torch.distributed.run --standalone)

say "collectives over $N GPUs"
timeout 150 "${TORCHRUN[@]}" --nproc-per-node "$N" -m ssmbench probe --collectives --device cuda \
  --out "$OUT/collectives-${N}gpu.yaml" || say "probe --collectives FAILED (exit $?)"

mkdir -p "$OUT/tp"
for T in 1 2 4 8; do
  [ "$T" -le "$N" ] || continue
  for pair in "codestral-mamba-7b mamba mamba2" "llama-3-8b attn,mlp transformer"; do
    read -r model block name <<<"$pair"
    say "TP block $name, tp=$T"
    timeout 120 "${TORCHRUN[@]}" --nproc-per-node "$T" -m ssmbench.measure.tp_blocks --model "$model" \
      --block "$block" --batch 1 --seqlen "$SEQLEN" --hw "$HW" --out "$OUT/tp/$name-tp$T.json" \
      || say "TP block $name tp=$T FAILED (exit $?)"
  done
done

for G in 1 "$N"; do
  say "sharded measurement on $G GPU(s)"
  timeout 150 "${TORCHRUN[@]}" --nproc-per-node "$G" -m ssmbench measure --suite default_h200_a --filter sdpa \
    --device cuda --no-energy --out "$OUT/sharded-${G}gpu" --distributed --case-timeout 60 >/dev/null \
    || say "sharded measurement on $G GPU(s) ended with exit $?"
done

"$PY" - "$OUT" "$N" <<'EOF'
import glob, json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/tp/*.json"))]
print("TP blocks (measurement vs analytic bound + interconnect model, prefill):")
for r in rows:
    p = r["predicted"]
    print(f"  {r['model']:<20} {'+'.join(r['blocks']):<9} tp={r['tp']}  measured {r['measured']['time_s']*1e3:8.3f} ms  "
          f"predicted {p['time_s']*1e3:8.3f} ms (compute {p['compute_s']*1e3:.3f}, comm {p['communication_s']*1e3:.3f})  "
          f"ratio {r['ratio_measured_to_predicted']:.3f}  [{r['implementation']}]")
multi = [abs(1 / r["ratio_measured_to_predicted"] - 1) for r in rows if r["tp"] > 1]
if multi:
    print(f"  median |predicted / measured - 1| over TP > 1: {statistics.median(multi):.3f} (issue #18 target <= 0.15)")
def rate(g):
    for p in glob.glob(f"{out}/sharded-{g}gpu/run-*.json"):
        return json.load(open(p))["meta"]["distributed"]["cases_per_s"]
one, many = rate(1), rate(n)
if one and many:
    print(f"sharded measurement: {one:.3f} cases/s on 1 GPU, {many:.3f} on {n} = {many / one:.2f} x "
          f"(target >= {0.9 * n:.1f} x)")
EOF
end_call
