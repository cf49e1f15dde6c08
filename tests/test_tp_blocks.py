"""The TP block harness (measure/tp_blocks.py) under torchrun with gloo on the CPU: a Mamba-2 block and an
attention + MLP layer of a tiny model split over 2 ranks, timed, beside the prediction of the same block.
The CPU times test the harness only; the validation itself runs on GPUs (scripts/device_multigpu.sh)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from ssmbench.analytic.workloads.models import load_model_file
from ssmbench.hwspecs import get_spec
from ssmbench.measure.tp_blocks import one_layer_model, predicted

TINY = """schema_version: 1
id: tiny-hybrid
name: tiny hybrid for the TP harness test
family: hybrid
sources:
  test: {title: "test dimensions", tag: A}
d_model: 64
vocab: 128
tie_embeddings: true
norm: rmsnorm
blocks:
  mamba: {kind: mamba2, d_state: 16, d_conv: 4, expand: 2, headdim: 16, ngroups: 2, chunk_size: 32}
  attn: {kind: attention, heads: 4, kv_heads: 2, head_dim: 16, rope_dim: 16}
  mlp: {kind: mlp, d_ff: 128, activation: silu, gated: true}
layers:
  - {repeat: 1, blocks: [mamba]}
  - {repeat: 1, blocks: [attn, mlp]}
"""


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text(TINY)
    return p


def test_the_prediction_is_the_blocks_and_their_all_reduces(tiny):
    m = load_model_file(tiny)
    layer = one_layer_model(m, ["attn", "mlp"])
    assert layer.layer_sequence == (("attn", "mlp"),) and layer.block("attn").rope_dim is None
    p = predicted(m, ["attn", "mlp"], get_spec("h200-sxm"), 2, 1, 64, "bf16")
    assert [c["what"].split(":")[0] for c in p["communication"]] == ["attn", "mlp"]
    assert p["time_s"] == pytest.approx(p["compute_s"] + p["communication_s"])
    assert predicted(m, ["mamba"], get_spec("h200-sxm"), 1, 1, 64, "bf16")["communication_s"] == 0


@pytest.mark.parametrize("block,port", [("mamba", 29711), ("attn,mlp", 29712)])
def test_tp_block_under_torchrun(tiny, tmp_path, block, port):
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(port), "-m", "ssmbench.measure.tp_blocks", "--model", str(tiny), "--block", block,
           "--batch", "2", "--seqlen", "64", "--device", "cpu", "--target-time", "0.02", "--out", str(out)]
    done = subprocess.run(cmd, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["tp"] == 2 and r["measured"]["time_s"] > 0 and r["predicted"]["time_s"] > 0
    assert r["ratio_measured_to_predicted"] == pytest.approx(r["measured"]["time_s"] / r["predicted"]["time_s"])
    assert len(r["meta"]["ranks"]) == 2
    if block == "mamba":
        assert "torch reference" in r["implementation"]  # no mamba_ssm kernels on the CPU, and it says so
