"""The error and the notice of remote offload."""

from __future__ import annotations

from ..errors import EvflowError


class RemoteError(EvflowError):
    """A remote request failed for good, or a payload breaks a limit."""


class RemoteNotice(UserWarning):
    """A remote module runs locally (no worker with its resources, or a
    request that could not be completed)."""
