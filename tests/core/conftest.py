from pathlib import Path

import pytest

from . import toy_stages  # noqa: F401  (registers the test_* stages)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pipelines"


@pytest.fixture
def fixture_path():
    return lambda name: FIXTURES / f"{name}.yaml"
