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
                      names: tuple[str, ...]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that runs ``declare`` -- which imports construct
    and returns the module's construct declarations by name -- on the first use of any of
    ``names``, and keeps them as ordinary module attributes from then on.

    ``module`` is the module's ``globals()``; ``names`` must be what ``declare`` returns
    (a test holds the two equal, so ``from M import NAME`` finds every declaration).
    """

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module['__name__']!r} has no attribute {name!r}")
        built = declare()
        module.update(built)
        return built[name]

    return __getattr__
