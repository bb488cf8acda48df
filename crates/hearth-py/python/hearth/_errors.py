"""The exceptions hearth raises. Their text is the command line's (what
``hearth`` prints after ``hearth: error:``), naming the file and the place in
it for trace problems."""

from __future__ import annotations

from typing import Optional

__all__ = ["HearthError", "ConfigError", "TraceError", "TraceIOError"]


class HearthError(Exception):
    """Base class of every error hearth raises itself."""


class ConfigError(HearthError, ValueError):
    """A bad argument: unknown policy or parameter, bad cache size, mode, warm-up..."""


class TraceError(HearthError, ValueError):
    """A trace that cannot be read: format not recognised, malformed record.

    ``str(e)`` is ``FILE:LINE: what`` for text traces and
    ``FILE: byte OFFSET: what`` for binary ones, as on the command line.
    """

    file: Optional[str] = None
    #: 1-based line, for text traces.
    line: Optional[int] = None
    #: Byte offset (after decompression), for binary traces.
    byte_offset: Optional[int] = None
    #: What is wrong, without the location.
    reason: Optional[str] = None


class TraceIOError(HearthError, OSError):
    """A trace file that cannot be opened or read (``errno``, ``filename`` set)."""

    file: Optional[str] = None
    line: Optional[int] = None
    byte_offset: Optional[int] = None
    reason: Optional[str] = None

    def __str__(self) -> str:
        # OSError would print "[Errno N] ..." when errno is set; keep the CLI's text.
        return str(self.args[0]) if self.args else super().__str__()
