"""Every dimension, declared once, as a positive-integer sympy symbol.

Notation table: our letter, what it is, and the letter each paper uses for it.

| ours | meaning                                   | Mamba-1 (Gu & Dao 2023) | Mamba-2 / SSD (Dao & Gu 2024) | attention / FA papers | fla (gated delta rule) |
|------|-------------------------------------------|-------------------------|-------------------------------|-----------------------|------------------------|
| B    | batch (sequences)                         | B                       | batch                         | B (or b)              | B                      |
| L    | tokens processed (sequence / query length)| L                       | T (or L)                      | N (or N_q)            | T                      |
| S    | context length: keys in the KV cache      | -                       | -                             | N_k                   | -                      |
| D    | model width                               | D (d_model)             | d_model                       | d_model               | hidden_size            |
| E    | inner SSM width (expand x D)              | ED (d_inner)            | d_inner                       | -                     | -                      |
| N    | state size per channel / head             | N (d_state)             | N (d_state)                   | -                     | K (key dim = state)    |
| K    | causal conv1d width                       | d_conv                  | d_conv                        | -                     | conv_size              |
| R    | dt rank (Mamba-1 Delta projection)        | R (dt_rank)             | -                             | -                     | -                      |
| H    | heads (query heads; SSD heads)            | -                       | H (nheads)                    | H                     | H                      |
| G    | groups: KV heads (attention) / B,C groups | -                       | G (ngroups)                   | H_kv                  | -                      |
| P    | head dim                                  | -                       | P (headdim)                   | d                     | K (head_k_dim)         |
| Pv   | value head dim (delta rule)               | -                       | -                             | -                     | V (head_v_dim)         |
| C    | chunk length                              | -                       | Q (chunk_size)                | -                     | BT (chunk_size)        |
| M    | MIMO rank (Mamba-3)                       | -                       | -                             | -                     | -                      |
| F    | FFN hidden width                          | -                       | -                             | d_ff                  | intermediate_size      |
| V    | vocabulary size                           | V                       | V                         | V                         | V                      |
| I    | input features of a linear layer          | -                       | -                             | -                     | -                      |
| O    | output features of a linear layer         | -                       | -                             | -                     | -                      |
| X    | experts (MoE)                             | -                       | -                             | -                     | -                      |
| Xk   | experts per token (top-k)                 | -                       | -                             | -                     | -                      |
| Np   | parameter elements an optimizer updates   | -                       | -                             | -                     | -                      |
"""

from __future__ import annotations

import sympy as sp

DESCRIPTIONS: dict[str, str] = {
    "B": "batch (sequences)",
    "L": "tokens processed (sequence or query length)",
    "S": "context length (keys already in the KV cache)",
    "D": "model width",
    "E": "inner SSM width (expand x model width)",
    "N": "state size per channel or head",
    "K": "causal conv1d width",
    "R": "dt rank (Mamba-1 Delta projection)",
    "H": "heads",
    "G": "groups (KV heads for attention; B/C groups for SSD)",
    "P": "head dim",
    "Pv": "value head dim (delta rule)",
    "C": "chunk length",
    "M": "MIMO rank (Mamba-3)",
    "F": "FFN hidden width",
    "V": "vocabulary size",
    "I": "input features of a linear layer",
    "O": "output features of a linear layer",
    "X": "experts (MoE)",
    "Xk": "experts per token (top-k)",
    "Np": "parameter elements an optimizer step updates",
}

SYMBOLS: dict[str, sp.Symbol] = {name: sp.Symbol(name, integer=True, positive=True) for name in DESCRIPTIONS}

B, L, S, D, E, N, K, R, H, G, P, Pv, C, M, F, V, I, O, X, Xk, Np = (SYMBOLS[n] for n in DESCRIPTIONS)


def symbol(name: str) -> sp.Symbol:
    try:
        return SYMBOLS[name]
    except KeyError:
        raise KeyError(f"unknown dimension {name!r}; known: {', '.join(DESCRIPTIONS)}") from None
