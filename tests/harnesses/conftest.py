"""Fixtures of the harness tests."""
from __future__ import annotations

import pytest

from harnesses.proposers import ProposerContext
from tests.support.proposer import make_context


@pytest.fixture
def ctx(tmp_path) -> ProposerContext:
    return make_context(tmp_path)
