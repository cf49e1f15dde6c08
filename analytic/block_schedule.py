"""How a GPU's block scheduler spreads a grid of CTAs over an SM's slots (``chain.py``'s tile loops): each CTA, in
grid order, goes to the slot that frees first, every step of every CTA taking the same time, so the kernel ends
when the slot that finishes last does. The simulation replaces Graham's bound, (total - longest) / slots + longest
steps, which is exact only where the longest CTA is dispatched last onto slots that free at one time, and
overstates equal CTAs' whole waves by one CTA's length."""

from __future__ import annotations

import functools
import heapq
import math

# programs simulated one by one at most; a larger grid adds its further groups' steps spread over the slots (the
# schedule is in its steady state long before: each further group is the same work handed to slots that free
# evenly), which keeps a sweep over long sequences and large batches fast
SIMULATED_PROGRAMS = 1 << 16


@functools.lru_cache(maxsize=4096)
def list_schedule(group_steps: tuple[int, ...], groups: int, slots: int) -> float:
    """Steps until the last program ends when ``groups`` repeats of ``group_steps`` (programs in dispatch order)
    go to ``slots`` slots, each program to the slot that frees first (the block scheduler refills a slot as
    its CTA exits; every step takes the same time). Equal programs run in whole waves. Beyond
    ``SIMULATED_PROGRAMS`` programs the groups past them add their steps / slots."""
    n = groups * len(group_steps)
    if n <= 0 or slots <= 0:
        return 0.0
    if len(set(group_steps)) == 1:
        return float(group_steps[0] * math.ceil(n / slots))
    simulated = max(1, SIMULATED_PROGRAMS // len(group_steps), math.ceil(2 * slots / len(group_steps)))
    if groups > simulated:
        return list_schedule(group_steps, simulated, slots) + (groups - simulated) * sum(group_steps) / slots
    free = [0.0] * min(slots, n)
    for i in range(n):
        heapq.heapreplace(free, free[0] + group_steps[i % len(group_steps)])
    return float(max(free))
