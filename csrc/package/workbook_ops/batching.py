"""torch.vmap's batching rule for workbook::matmul (lesson 06), registered by the package's __init__."""

import torch


def matmul_batching_rule(info, in_dims, self, other):
    """torch.vmap's rule for workbook::matmul, which only knows 2-D matrices.

    `in_dims` says which dimension of each input is the batch (None: not batched). Return the
    result and the batch dimension of the result. A batch of left-hand matrices against one
    right-hand matrix is a single taller product; one left-hand matrix against a batch is a single
    wider one. Batches on both sides have no such trick here: one product per pair.
    """
    matmul_2d = torch.ops.workbook.matmul.default
    self_dim, other_dim = in_dims
    if other_dim is None:  # (B, n, k) @ (k, m): stack the rows, (B*n, k) @ (k, m)
        batch = self.movedim(self_dim, 0)
        size, n, k = batch.shape
        return matmul_2d(batch.reshape(size * n, k), other).reshape(size, n, -1), 0
    if self_dim is None:  # (n, k) @ (B, k, m): put the batch beside the columns, (n, k) @ (k, B*m)
        batch = other.movedim(other_dim, 0)
        size, k, m = batch.shape
        wide = matmul_2d(self, batch.movedim(0, 1).reshape(k, size * m))
        return wide.reshape(-1, size, m).movedim(1, 0), 0
    pairs = zip(self.movedim(self_dim, 0), other.movedim(other_dim, 0))
    return torch.stack([matmul_2d(a, b) for a, b in pairs]), 0
