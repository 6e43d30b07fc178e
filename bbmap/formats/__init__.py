"""Format declarations in construct: each on-disk layout declared once, parse and build.

The constants (magics, sizes, bits, offsets) are plain module attributes; the construct
declarations are built on first use (:func:`lazy_declarations`): construct costs ~7-10
ms to import, and the fast paths (numpy decoders, the build-id and Go checks) need only
the constants, which they take from the same modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def lazy_declarations(module: dict[str, Any], declare: Callable[[], dict[str, Any]],
                      names: tuple[str, ...]
                      ) -> tuple[Callable[[str], Any], Callable[[], dict[str, Any]]]:
    """A module's ``__getattr__`` (PEP 562) and ``declared()`` for its construct types.

    ``declare`` imports construct and returns the module's declarations by name; it runs
    once, on the first ``module.NAME`` / ``from module import NAME`` of any of ``names``
    or the first ``declared()`` call (what the module's own functions use: a module's
    ``__getattr__`` is not consulted for its global names), and its results become
    ordinary module attributes.  ``module`` is the module's ``globals()``; ``names`` must
    be exactly what ``declare`` returns (tests/test_formats_constants.py holds that).
    """

    def declared() -> dict[str, Any]:
        if names[0] not in module:
            module.update(declare())
        return module

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module['__name__']!r} has no attribute {name!r}")
        return declared()[name]

    return __getattr__, declared
