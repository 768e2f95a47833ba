"""The note keys of a worker: read from the file ``TENANTDB_NOTE_KEYS_FILE`` names."""

from __future__ import annotations

from tenantdb.core.seal import SealKeyError, SealKeys


def read_note_keys(path: str) -> SealKeys | None:
    """The keys in the file at ``path``; None when no file is named.

    Raises:
        SealKeyError: the file cannot be read, holds no key or a key too short (the message
            names the file, never a key).
    """
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SealKeyError(f"cannot read the note key file {path}: {type(exc).__name__}") from None
    try:
        return SealKeys.parse(text)
    except SealKeyError as exc:
        raise SealKeyError(f"{path}: {exc}") from None
