"""Name checks shared by configuration files."""

import keyword
import re

__all__ = ["check_identifier"]

_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")


def check_identifier(what, value):
    """Lower-case identifiers name Verilog modules, register blocks and JSON keys alike."""
    if not isinstance(value, str) or not _IDENT.match(value) or keyword.iskeyword(value):
        raise ValueError(f"{what} must be a lower-case identifier, not {value!r}")
    return value
