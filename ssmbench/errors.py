"""The one error type the CLI turns into a clear message and exit code 2 (bad input)."""


class UserError(ValueError):
    """Bad input from a user (a file, an argument, a dimension). ``str()`` is the whole message."""
