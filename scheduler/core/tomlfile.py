"""Read a TOML file, turning I/O and syntax errors into one exception type that names the file."""

from __future__ import annotations

import tomllib
from typing import Any


def read_toml(path: str, error: type[Exception]) -> dict[str, Any]:
    """The parsed file; raises ``error("<path>: <reason>")`` if it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise error(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None
