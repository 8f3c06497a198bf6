"""DeviceShare counts the GPUs that fit per node with ``fitting_gpus`` (a product over the mask's bytes)
instead of ``fits.sum(axis=1)``: the same counts for any mask shape and layout (hypothesis), and the
Filter's count test built on it refuses exactly the nodes with too few fitting GPUs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from app.plugins.deviceshare.plugin import fitting_gpus

MASKS = st.tuples(st.integers(0, 40), st.sampled_from([0, 1, 2, 4, 8, 16, 255, 256, 300])).flatmap(
    lambda shape: arrays(np.bool_, shape)
)


@settings(max_examples=150, deadline=None)
@given(MASKS, st.booleans())
def test_fitting_gpus_equals_the_row_sum(fits: np.ndarray, transposed_view: bool) -> None:
    if transposed_view:  # a non-contiguous mask (as a column slice or a transpose gives) counts the same
        fits = np.asfortranarray(fits)
    counted = fitting_gpus(fits)
    assert counted.shape == (fits.shape[0],)
    assert counted.astype(np.int64).tolist() == fits.sum(axis=1).tolist()


def test_a_full_row_of_255_gpus_does_not_wrap() -> None:
    fits = np.ones((3, 255), dtype=bool)
    fits[1, :7] = False
    assert fitting_gpus(fits).tolist() == [255, 248, 255]
    assert fitting_gpus(np.ones((2, 256), dtype=bool)).tolist() == [256, 256]
