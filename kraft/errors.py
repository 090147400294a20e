"""kraft's error codes and exceptions: re-exported from `storage.errors`, their one home."""

from storage.errors import *  # noqa: F403
from storage.errors import ERROR_CLASSES, ErrorCode, InvariantViolation, KraftError, error_for

__all__ = ["ERROR_CLASSES", "ErrorCode", "InvariantViolation", "KraftError", "error_for"] + [
    cls.__name__ for cls in ERROR_CLASSES.values()
]
