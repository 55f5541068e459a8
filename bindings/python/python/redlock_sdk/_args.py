"""Checks of argument types and the Python idioms for waits (``threading.Lock`` compatible).

Values (ranges, lengths) are checked by the core, which knows the limits; types are checked
here, because ctypes would otherwise report them obscurely.
"""

from __future__ import annotations

import math
import numbers
import re
import threading

from ._errors import ArgumentTypeError, InvalidArgumentError


def string(what: str, value: object) -> str:
    """A str that is valid Unicode text: one with an unpaired surrogate (``"a\\ud800"``, from
    ``surrogateescape`` decoding, say) has no UTF-8 form, so it could name no lock nor owner."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{what} must be a str, not {type(value).__name__}")
    if not _is_text(value):
        raise InvalidArgumentError(f"{what} must be valid Unicode: it has an unpaired surrogate")
    return value


def optional_string(what: str, value: object) -> str | None:
    return None if value is None else string(what, value)


def label(text: str) -> str:
    """A label stored with a hold, for people to read: unpaired surrogates become U+FFFD, and an
    empty one (a thread named ``""``) is named by the thread's id."""
    if not _is_text(text):
        text = _SURROGATE.sub("\ufffd", text)
    return text or f"thread {threading.get_ident()}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_text(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no unpaired surrogate); ASCII is checked cheaply."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def number(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    return float(value)


def optional_number(what: str, value: object) -> float | None:
    return None if value is None else number(what, value)


FOREVER = -1.0
"""What the native calls take for "no wait limit" and "no lease" (any negative number)."""


def lease_seconds(lease: object) -> float:
    """A lease for the native calls: ``FOREVER`` (watchdog) for ``None``."""
    seconds = optional_number("lease", lease)
    if seconds is None:
        return FOREVER
    if math.isnan(seconds) or seconds < 0:
        raise InvalidArgumentError(f"lease must be a number of seconds > 0, got {seconds}")
    return seconds


def wait_seconds(blocking: object, timeout: object) -> float:
    """The wait for the native calls: ``FOREVER`` or seconds (``0.0`` = try once).

    Like ``threading.Lock.acquire``: ``timeout=-1`` (or ``None``) waits forever, other negative
    timeouts are errors, and a non-blocking call takes no timeout.
    """
    if not isinstance(blocking, (bool, int)):
        raise ArgumentTypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    seconds = optional_number("timeout", timeout)
    forever = seconds is None or seconds == -1 or seconds == math.inf
    if not blocking:
        if not forever:
            raise InvalidArgumentError("can't specify a timeout for a non-blocking call")
        return 0.0
    if forever:
        return FOREVER
    if math.isnan(seconds) or seconds < 0:
        raise InvalidArgumentError(f"timeout must be -1, None or a number >= 0, got {seconds}")
    return seconds
