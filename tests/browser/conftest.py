"""The ``chromium`` fixture (see browser_tools): skipped without /usr/bin/chromium, except in
CI (``CI=true``) where it fails."""

from __future__ import annotations

import os
import shutil

import pytest
from browser_tools import CHROMIUM, Chromium


@pytest.fixture
def chromium(tmp_path):
    """A :class:`Chromium` with a fresh profile directory."""
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        message = f"{CHROMIUM} not installed (make system-deps; or apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    browser = Chromium(CHROMIUM, profile)
    yield browser
    shutil.rmtree(profile, ignore_errors=True)
