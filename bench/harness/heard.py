"""What a benchmark hears from a command it runs: the command speaks its terminal's language
(English, or Chinese in a Chinese terminal), so a line is known by its row's words in either."""

from __future__ import annotations

from retrieval_svc.words import LINES


def starts_as(line: str, *keys: str) -> bool:
    """Whether ``line`` begins as one of the rows ``keys`` does (their words before the first
    value), in either language."""
    return line.startswith(tuple(said.split("{")[0] for key in keys for said in LINES[key]))


def holds(text: str, key: str) -> bool:
    """Whether ``text`` (a command's output) holds row ``key``'s words (one without values) in
    either language."""
    return any(said in text for said in LINES[key])
