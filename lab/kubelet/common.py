"""What the API pods' modules share: the error a container's status shows, the log line, the
restart back-off and the PATH a container starts with."""

from __future__ import annotations

import time

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 20.0
BACKOFF_RESET_AFTER = 60.0
MAX_GRACE = 10.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class PodError(RuntimeError):
    """A container of a mapped pod cannot be created; the message goes into its status."""


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pods: {message}", flush=True)
