"""``open_nvml``: the NVML backend ``koord agent`` and ``koord device-daemon`` start with, from ``--nvml-capture``
and ``--gpu``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.collectors.nvml import RecordedNVML, open_nvml
from tests.agent.fake_nvml import H200

LOG = logging.getLogger("test-open-nvml")


def test_a_capture_answers_whatever_gpu_says() -> None:
    for enabled in (True, False):
        assert isinstance(open_nvml(H200 / "nvml.json", enabled, LOG), RecordedNVML)


def test_a_capture_that_cannot_be_read_or_parsed_is_a_value_error_naming_the_flag(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError, match=f"^--nvml-capture {missing}: "):
        open_nvml(missing, True, LOG)
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    with pytest.raises(ValueError, match=f"^--nvml-capture {garbled}: "):
        open_nvml(garbled, True, LOG)


def test_no_capture_and_no_gpu_is_no_backend() -> None:
    assert open_nvml(None, False, LOG) is None
