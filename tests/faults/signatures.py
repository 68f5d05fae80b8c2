"""A plain softmax backward: passed as an implementation of another op, its signature
cannot take that op's inputs, and the run refuses it before any item."""


def softmax_bwd(*, y, dy, mask, scale, out):
    out["dx"].copy_(y * (dy - (dy * y).sum(-1, keepdim=True)))
