"""The empty-cluster relocation rules of :mod:`skxclust._relocation`, one helper at a time."""

import pytest
import torch

from skxclust._relocation import (
    farthest_for_empty,
    relocate_empty,
    relocate_in_groups,
    relocate_in_sums,
)

F64 = torch.float64


def test_farthest_for_empty_takes_at_most_every_sample():
    # more empty clusters than samples: every sample, farthest first
    far = farthest_for_empty(torch.tensor([1.0, 3.0], dtype=F64), 3)
    assert far.tolist() == [1, 0]


def test_relocate_in_sums_moves_samples_in_every_restart_with_an_empty_cluster():
    # restart 0 is full, restart 1 has an empty cluster: only restart 1 is asked and moved
    sums = torch.tensor([[[1.0], [4.0]], [[7.0], [0.0]]], dtype=F64)
    weight = torch.tensor([[1.0, 1.0], [2.0, 0.0]], dtype=F64)
    asked = []

    def farthest(r, m):
        asked.append((r, m))
        return torch.tensor([[5.0]], dtype=F64), torch.tensor([1.0], dtype=F64), torch.tensor([0])

    relocate_in_sums(sums, weight, farthest)
    assert asked == [(1, 1)]
    torch.testing.assert_close(sums, torch.tensor([[[1.0], [4.0]], [[2.0], [5.0]]], dtype=F64))
    torch.testing.assert_close(weight, torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=F64))


def test_relocate_empty_moves_each_empty_centroid_to_its_own_farthest_row():
    # two empty centroids in restart 1: the farthest row to the first, the next to the second
    centers = torch.zeros(2, 3, 2, dtype=F64)
    weight = torch.tensor([[1.0, 2.0, 3.0], [0.0, 4.0, 0.0]], dtype=F64)
    farthest = torch.tensor([[[9.0, 9.0], [8.0, 8.0]], [[7.0, 1.0], [6.0, 2.0]]], dtype=F64)
    relocate_empty(centers, weight, lambda r, m: farthest[r, :m])
    expected = torch.zeros(2, 3, 2, dtype=F64)
    expected[1, 0], expected[1, 2] = farthest[1, 0], farthest[1, 1]
    torch.testing.assert_close(centers, expected, rtol=0, atol=0)


@pytest.mark.parametrize("weight, moved", [
    ([0.0, 2.0, 0.0, 0.0, 3.0, 0.0], {0: 1, 2: 3, 3: 5, 5: 6}),  # two empties per group
    ([0.0, 2.0, 1.0, 1.0, 3.0, 0.0], {0: 1, 5: 5}),  # one in each group
])
def test_empty_centroids_of_every_group_move_to_their_groups_farthest_rows(weight, moved):
    # rows 0-3 and centroids 0-2 form group 0, rows 4-7 and centroids 3-5 group 1
    X = torch.arange(16, dtype=F64).reshape(8, 2)
    centers = torch.full((1, 6, 2), -1.0, dtype=F64)
    distances = torch.tensor([[1.0, 7.0, 3.0, 5.0, 2.0, 8.0, 6.0, 4.0]], dtype=F64)
    relocate_in_groups(X, centers, torch.tensor([weight], dtype=F64), distances,
                       torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), torch.tensor([0, 0, 0, 1, 1, 1]))
    expected = torch.full((6, 2), -1.0, dtype=F64)
    for k, row in moved.items():
        expected[k] = X[row]
    torch.testing.assert_close(centers[0], expected, rtol=0, atol=0)
