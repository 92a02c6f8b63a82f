"""The root of every error supernic reports to a user."""

__all__ = ["SnicError"]


class SnicError(Exception):
    """An error with a one-line message for the user and the exit code the CLI returns for it:
    2 for bad usage, a bad configuration or a request refused before anything changed (the
    default), 1 for an operation that failed on the device or a check that failed. The CLI
    catches this class once (:func:`supernic.driver.cli.main`)."""
    exit_code = 2
