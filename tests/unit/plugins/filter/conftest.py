"""The filter plugin tests' stand-in for the library a filter calls (``stub``)."""

from __future__ import annotations

import pytest
from poweraware_testing import Recorder


@pytest.fixture
def stub(monkeypatch):
    def install(module, name, result="result", error=None):
        recorder = Recorder(result, error)
        monkeypatch.setattr(module, name, recorder)
        return recorder

    return install
