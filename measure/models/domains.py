"""Workloads from other domains on mamba-ssm's backbone (GPU): a vision Mamba and a graph Mamba.

Both reuse ``MambaLMHeadModel`` built from the workload file (``build.build_mamba_ssm``) and replace
its ends; the layers in between are mamba-ssm's own blocks.

- ``vision`` (Vim-style, ``analytic/workloads/models/vim-s-bidir.yaml``): an image of P x P patches
  of 3 x 16 x 16 pixels; the patch embedding is a linear map of each patch's 768 pixels to d_model
  (Vim's 16 x 16 stride-16 convolution computes exactly this); the layers scan alternately forward
  and backward along the patch sequence (the sequence, with its fp32 residual, is flipped between
  layers: a causal scan over the flipped sequence is the backward scan); the head is the mean over
  patches followed by the classifier (``lm_head``, vocab = classes).
- ``graph`` (Graph-Mamba-style, ``graph-mamba-style.yaml``): each graph is a sequence of nodes
  sorted by degree (low to high, so high-degree nodes see the most context, as Graph-Mamba's node
  prioritisation does); node features are atom-type ids through the embedding; every layer is a
  Mamba mixer followed by a gated MLP; the head is the mean over nodes and a linear classifier.
  Degrees are drawn at random per node; the sort (``argsort`` + ``gather``) runs in every step.
  Graph-Mamba's local message passing (GatedGCN) is not part of this workload (it is not
  a state-space op; the workload file says so).
"""

from __future__ import annotations

from .build import Built, build_mamba_ssm

PATCH_PIXELS = 3 * 16 * 16  # one 16 x 16 RGB patch
GRAPH_MAX_DEGREE = 8  # random node degrees in [1, GRAPH_MAX_DEGREE]


def _backbone(lm, hidden, flip_between: bool):
    """mamba-ssm MixerModel.forward from the embedded input, with optional flips between layers."""
    from mamba_ssm.ops.triton.layer_norm import RMSNorm, layer_norm_fn

    bb = lm.backbone
    residual = None
    for i, layer in enumerate(bb.layers):
        if flip_between and i > 0:
            hidden, residual = hidden.flip(1), residual.flip(1)
        hidden, residual = layer(hidden, residual)
    return layer_norm_fn(hidden, bb.norm_f.weight, bb.norm_f.bias, eps=bb.norm_f.eps, residual=residual,
                         prenorm=False, residual_in_fp32=bb.residual_in_fp32, is_rms_norm=isinstance(bb.norm_f, RMSNorm))


def build_domain(runner: str, model, entry: dict, device, dtype) -> Built:
    import torch

    lm = build_mamba_ssm(model, device, dtype)
    classes = model.spec.vocab
    if runner == "vision":
        patch = torch.nn.Linear(PATCH_PIXELS, model.d_model, device=device, dtype=dtype)
        lm.add_module("patch_embed", patch)

        def make(batch, tokens):
            return torch.randn(batch, tokens, PATCH_PIXELS, device=device, dtype=dtype)

        def forward(inputs, cache=None, last_only=False):
            h = _backbone(lm, patch(inputs), flip_between=True)
            return lm.lm_head(h.mean(dim=1))  # [B, classes]
        notes = ["patch embedding: nn.Linear(768, d_model) on pre-cut patches; layers alternate scan direction"]
    else:
        def make(batch, tokens):
            feats = torch.randint(0, classes, (batch, tokens), device=device)
            degree = torch.randint(1, GRAPH_MAX_DEGREE + 1, (batch, tokens), device=device)
            return feats, degree

        def forward(inputs, cache=None, last_only=False):
            feats, degree = inputs
            order = torch.argsort(degree, dim=1, stable=True)
            h = lm.backbone.embedding(torch.gather(feats, 1, order))
            h = _backbone(lm, h, flip_between=False)
            return lm.lm_head(h.mean(dim=1))
        notes = ["node order: argsort by degree in every step; no message passing"]

    def targets(inputs, logits):
        return torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    return Built(lm, forward, make, targets, f"mamba_ssm ({runner} ends)", notes)
