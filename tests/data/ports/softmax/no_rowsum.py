"""Softmax backward port that forgets the row-sum term: dx = y * g, as if the Jacobian
were diagonal."""

import torch


def backward(*, y, dy, mask, scale, out):
    g = dy.float()
    if mask is not None:
        g = g * mask.float() * scale
    out["dx"].copy_(y.float() * g)
