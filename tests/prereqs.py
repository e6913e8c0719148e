"""What a test needs from the machine, as a failure rather than a silent skip.

`make test` installs what the multi-host and browser tests need (.ci/test-deps); when something is
still missing the test fails saying what, unless the user opts out with CMX_ALLOW_SKIP=1 (then it
is skipped, and `pytest -ra` lists it)."""

from __future__ import annotations

import os

import pytest

OPT_OUT = "CMX_ALLOW_SKIP"


def require(missing: str | None) -> None:
    """Fail (or, with CMX_ALLOW_SKIP=1, skip) when ``missing`` names something absent."""
    if not missing:
        return
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{missing} ({OPT_OUT}=1)")
    pytest.fail(
        f"{missing}: run .ci/test-deps (as root) to install it, or set {OPT_OUT}=1 to skip this test knowingly",
        pytrace=False,
    )
