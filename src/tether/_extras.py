"""How to install an optional extra, said in a command that works: Tether is installed from a
checkout (``pip install -e .``), and no registry has a ``tether`` distribution to add an extra
to. The hint names the extra's own packages, read from the installed metadata (so it follows
``pyproject.toml``), and the checkout's command."""

from __future__ import annotations

import re
from importlib import metadata

__all__ = ("install_hint",)

_MARKER = re.compile(r"""^\s*extra\s*==\s*["']([^"']+)["']\s*$""")


def install_hint(extra: str) -> str:
    """``needs the postgres extra: pip install 'psycopg[binary]>=3.2' ...`` for ``extra``."""
    checkout = f"pip install -e '.[{extra}]'"
    packages = " ".join(f"'{requirement}'" for requirement in _requirements(extra))
    if not packages:
        return f"needs the {extra} extra: {checkout} from a checkout of Tether"
    return f"needs the {extra} extra: pip install {packages} (or, from a checkout, {checkout})"


def _requirements(extra: str) -> list[str]:
    try:
        declared = metadata.requires("tether") or []
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return []
    found = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        named = _MARKER.match(marker)
        if named is not None and named.group(1) == extra:
            found.append(requirement.strip())
    return found
