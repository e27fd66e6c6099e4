"""What the sub-commands share: user errors, the ``--out`` check, atomic writes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the input or the options were wrong, not that vastml is broken."""
    from sklearn.exceptions import NotFittedError

    from vastml import VastmlError

    return (ValueError, TypeError, OSError, MemoryError, NotFittedError, VastmlError)


def check_out(out: str | None) -> None:
    """Refuse an ``--out`` that cannot be written before any work is done."""
    if out is None:
        return
    import os
    from pathlib import Path

    parent = Path(out).expanduser().resolve().parent
    if not parent.is_dir():
        raise ValueError(f"--out {out}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"--out {out}: the folder {parent} is not writable")
    if Path(out).is_dir():
        raise ValueError(f"--out {out}: is a folder, expected a file name")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, writer: Callable[[str], object]) -> None:
    """Write ``path`` through a temporary file renamed into place, so a reader never sees half
    a file. The file gets the mode a plain ``open(path, "w")`` would give (0666 less the
    umask), not mkstemp's private 0600."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix)
    os.close(fd)
    try:
        writer(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
