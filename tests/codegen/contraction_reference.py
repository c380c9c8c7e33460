"""numpy references for dot and convolution tests (float64 or exact integer arithmetic)."""

from __future__ import annotations

import itertools

import numpy as np


def convolution(x: np.ndarray, w: np.ndarray, dim_labels: str, *, size, stride=None,
                pad=None, lhs_dilate=None, rhs_dilate=None, reversal=None,
                feature_groups: int = 1, batch_groups: int = 1) -> np.ndarray:
    """XLA's convolution by its definition: every output element sums input x kernel over
    the window taps and the input features of its group."""
    lhs_l, rest = dim_labels.split("_")
    rhs_l, out_l = rest.split("->")
    rank = len(lhs_l)
    spatial = [str(i) for i in range(rank - 2)]
    xs = x.transpose([lhs_l.index(c) for c in "bf" + "".join(spatial)])
    ws = w.transpose([rhs_l.index(c) for c in "oi" + "".join(spatial)])
    n_s = rank - 2
    stride = stride or (1,) * n_s
    pad = pad or ((0, 0),) * n_s
    lhs_dilate = lhs_dilate or (1,) * n_s
    rhs_dilate = rhs_dilate or (1,) * n_s
    reversal = reversal or (0,) * n_s
    for s, r in enumerate(reversal):
        if r:
            ws = np.flip(ws, axis=2 + s)
    # lhs dilation then padding (negative padding crops)
    for s in range(n_s):
        ld = lhs_dilate[s]
        if ld > 1:
            shape = list(xs.shape)
            shape[2 + s] = (xs.shape[2 + s] - 1) * ld + 1
            dil = np.zeros(shape, xs.dtype)
            idx = [slice(None)] * xs.ndim
            idx[2 + s] = slice(None, None, ld)
            dil[tuple(idx)] = xs
            xs = dil
        lo, hi = pad[s]
        widths = [(0, 0)] * xs.ndim
        widths[2 + s] = (max(lo, 0), max(hi, 0))
        xs = np.pad(xs, widths)
        idx = [slice(None)] * xs.ndim
        idx[2 + s] = slice(max(-lo, 0), xs.shape[2 + s] - max(-hi, 0))
        xs = xs[tuple(idx)]
    n, c = xs.shape[:2]
    o, i = ws.shape[:2]
    out_sp = [(xs.shape[2 + s] - ((size[s] - 1) * rhs_dilate[s] + 1)) // stride[s] + 1
              for s in range(n_s)]
    nb = n // batch_groups
    acc = np.zeros((nb, o, *out_sp), np.result_type(x.dtype, w.dtype, np.float64)
                   if x.dtype.kind == "f" else np.int64)
    og = o // (feature_groups * batch_groups)
    for tap in itertools.product(*(range(k) for k in size)):
        window = [slice(None), slice(None)]
        for s in range(n_s):
            start = tap[s] * rhs_dilate[s]
            window.append(slice(start, start + (out_sp[s] - 1) * stride[s] + 1, stride[s]))
        patch = xs[tuple(window)].astype(acc.dtype)
        wt = ws[(slice(None), slice(None)) + tap].astype(acc.dtype)
        for g in range(feature_groups * batch_groups):
            outs = slice(g * og, (g + 1) * og)
            if batch_groups > 1:
                src = patch[g * nb:(g + 1) * nb]
            else:
                src = patch[:, g * i:(g + 1) * i]
            acc[:, outs] += np.einsum("nc...,oc->no...", src, wt[outs])
    return acc.transpose([("bf" + "".join(spatial)).index(c) for c in out_l])
