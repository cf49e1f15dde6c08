"""Attention op family against PyTorch: FLOP-counter cross-checks (naive reference, SDPA's math
path, the fused-kernel formula on meta tensors), reference agreement with SDPA in fp64, and the
kernels PyTorch dispatches for the naive reference."""

from __future__ import annotations

import pytest
from ssmbench.analytic.conventions import CAUSAL_FRACTION as _CF
from ssmbench.analytic.registry import cost

torch = pytest.importorskip("torch")
from ssmbench.analytic.ops.attention.ref import attention_ref, causal_mask  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

CAUSAL_FRACTION = float(_CF)


def ev(op, impl, mode, dtype="bf16", **dims):
    return cost(op, dims, impl, mode, dtype)


# PyTorch FLOP counter ----------------------------------------------------------------------------------
def _qkv(B, L, S, H, G, P, dtype=None, grad=False, device="cpu"):
    g = torch.Generator().manual_seed(0)
    dtype = dtype or torch.float64
    mk = lambda *s: torch.randn(*s, generator=g, dtype=dtype).to(device).requires_grad_(grad)  # noqa: E731
    return mk(B, H, L, P), mk(B, G, S, P), mk(B, G, S, P)


def _count(fn):
    with FlopCounterMode(display=False) as fc:
        out = fn()
    return fc.get_total_flops(), out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("G", [1, 2, 4])
def test_flop_counter_on_naive_reference(causal, G):
    dims = dict(B=2, L=8, S=8, H=4, G=G, P=16)
    q, k, v = _qkv(**dims, grad=True)
    fwd, o = _count(lambda: attention_ref(q, k, v, causal, causal_mask(8, 8) if causal else None))
    op = "attention_causal" if causal else "attention_full"
    assert fwd == ev(op, "naive", "fwd", **dims).tensor_flops
    do = torch.randn_like(o)
    bwd, _ = _count(lambda: torch.autograd.grad(o, (q, k, v), do))
    assert bwd == ev(op, "naive", "bwd", **dims).tensor_flops == 2 * fwd
    # the same matmul work as MHA with K/V repeated: grouping changes bytes, not FLOPs
    kr, vr = k.repeat_interleave(4 // G, 1), v.repeat_interleave(4 // G, 1)
    fwd_mha, _ = _count(lambda: attention_ref(q, kr, vr, causal))
    assert fwd_mha == fwd
    # decode: one query against the cache
    qd = q[:, :, -1:].detach()
    dec, _ = _count(lambda: attention_ref(qd, k.detach(), v.detach(), False))
    assert dec == ev(op, "naive", "decode", **dims).tensor_flops


@pytest.mark.parametrize("G", [1, 4])
def test_flop_counter_sdpa_math_backend(G):
    """SDPA's math path under FlopCounterMode: causal counted in full, backward without recompute."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dims = dict(B=2, L=16, S=16, H=4, G=G, P=8)
    for causal in (False, True):
        q, k, v = _qkv(**dims, grad=True)
        with sdpa_kernel(SDPBackend.MATH):
            fwd, o = _count(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=True))
            bwd, _ = _count(lambda: torch.autograd.grad(o, (q, k, v), torch.ones_like(o)))
        op = "attention_causal" if causal else "attention_full"
        ours_fwd = ev(op, "fa2", "fwd", **dims).tensor_flops
        full_fwd = ev("attention_full", "fa2", "fwd", **dims).tensor_flops
        assert fwd == full_fwd  # torch counts the causal score matrix in full ...
        assert ours_fwd == (CAUSAL_FRACTION * fwd if causal else fwd)  # ... we count half (S = L)
        assert bwd == 2 * fwd  # math-path backward: 4 matmuls, the probabilities were saved
        assert ev("attention_full", "naive", "bwd", **dims).tensor_flops == bwd
        assert ev("attention_full", "fa2", "bwd", **dims).tensor_flops == 1.25 * bwd  # + recomputed QK^T


def test_flop_counter_fused_sdpa_formula_on_meta():
    """The formula FlopCounterMode applies to the fused CUDA kernels (run on meta tensors): forward
    counts causal in full, backward includes the recomputation (5 matmuls = 2.5x forward), as ours."""
    B, L, H, P = 2, 16, 4, 8
    q, k, v = (torch.empty(B, H, L, P, device="meta", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        try:
            fwd, out = _count(lambda: torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, None, True, 0.0, causal))
            bwd, _ = _count(lambda: torch.ops.aten._scaled_dot_product_efficient_attention_backward(
                torch.empty_like(out[0]), q, k, v, None, out[0], out[1], out[2], out[3], 0.0,
                [True, True, True, False], causal))
        except (RuntimeError, TypeError) as err:  # the private op's signature changed
            pytest.skip(f"efficient-attention op not callable on meta here: {err}")
        dims = dict(B=B, L=L, S=L, H=H, G=H, P=P)
        op = "attention_causal" if causal else "attention_full"
        assert fwd == 4 * B * H * L * L * P
        assert bwd == 2.5 * fwd
        factor = CAUSAL_FRACTION if causal else 1
        assert ev(op, "fa2", "fwd", **dims).tensor_flops == factor * fwd
        assert ev(op, "fa2", "bwd", **dims).tensor_flops == factor * bwd
        assert ev(op, "fa3", "bwd", **dims).tensor_flops == factor * bwd


# References agree -----------------------------------------------------------------------------------
@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_naive_reference_matches_sdpa_fp64(G, causal):
    q, k, v = _qkv(B=2, L=12, S=12, H=4, G=G, P=8)
    ours = attention_ref(q, k, v, causal)
    r = 4 // G
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), is_causal=causal)
    torch.testing.assert_close(ours, sdpa, rtol=1e-12, atol=1e-12)
    gqa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(ours, gqa, rtol=1e-12, atol=1e-12)


def test_causal_with_cached_prefix_is_bottom_right_aligned():
    L, S = 5, 12
    q, k, v = _qkv(B=1, L=L, S=S, H=2, G=2, P=8)
    allowed = ~causal_mask(L, S)
    assert allowed.sum() == L * S - L * (L - 1) // 2  # the count's L*S - L^2/2 plus the diagonal's L/2
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(attention_ref(q, k, v, True), sdpa, rtol=1e-12, atol=1e-12)
    # the last query sees every key: decode (L = 1) is the same for causal and full
    torch.testing.assert_close(attention_ref(q[:, :, -1:], k, v, False), sdpa[:, :, -1:], rtol=1e-12, atol=1e-12)


class _Dispatched(torch.utils._python_dispatch.TorchDispatchMode):
    VIEWS = {"view", "_unsafe_view", "transpose", "expand", "detach", "t", "permute", "alias", "as_strided", "slice"}

    def __init__(self):
        super().__init__()
        self.kernels = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ not in self.VIEWS:
            self.kernels.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("causal", [False, True])
def test_naive_launches_match_dispatched_kernels(causal):
    """The naive rule's kernel list is what PyTorch dispatches for the reference and its backward."""
    dims = dict(B=2, L=8, S=8, H=4, G=2, P=16)
    q, k, v = _qkv(**dims, grad=True)
    mask = causal_mask(8, 8)
    with _Dispatched() as f:
        o = attention_ref(q, k, v, causal, mask)
    do = torch.ones_like(o)
    with _Dispatched() as b:
        torch.autograd.grad(o, (q, k, v), do)
    op = "attention_causal" if causal else "attention_full"
    assert len(f.kernels) == ev(op, "naive", "fwd", **dims).launches, f.kernels
    assert len(b.kernels) == ev(op, "naive", "bwd", **dims).launches, b.kernels
    q1, k1, v1 = q[:, :, -1:].detach(), k.detach(), v.detach()
    with _Dispatched() as d:
        attention_ref(q1, k1, v1, False)
    assert len(d.kernels) == ev(op, "naive", "decode", **dims).launches, d.kernels
