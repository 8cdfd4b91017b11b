"""Old and Chinese office formats, converted by LibreOffice and read by the parsers we have.

A company share holds Word 97-2003 (``.doc``), PowerPoint 97-2003 (``.ppt``), RTF,
OpenDocument (``.odt``, ``.ods``, ``.odp``) and WPS Office's own formats (``.wps``, ``.et``,
``.dps``: WPS writes them as the 97-2003 binary formats or as Office Open XML). No well-kept
Python library reads them, and LibreOffice reads them all: each file is converted headless
to ``.docx``, ``.xlsx`` or ``.pptx`` and handed to ``formats.office`` / ``formats.sheets``, so a
table in a ``.doc`` becomes rows that name their columns, as in a ``.docx``.

The conversion runs inside the document's worker: ``soffice`` inherits the worker's memory cap
(``RLIMIT_AS``), gets the document's remaining time as its timeout, and dies with the worker
(Linux's parent-death signal). Each worker keeps one LibreOffice profile for its lifetime: the
first conversion creates it (about 1.5 s here), the next ones take about 0.6 s.

Without LibreOffice installed such a file is a failed document whose reason says how to
install it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from indexer.documents import DocumentError

# What each suffix is converted to (the format whose reader then reads it).
TARGETS = {
    ".doc": "docx",
    ".wps": "docx",
    ".rtf": "docx",
    ".odt": "docx",
    ".ppt": "pptx",
    ".dps": "pptx",
    ".odp": "pptx",
    ".et": "xlsx",
    ".ods": "xlsx",
}
NAMES = {
    ".doc": "Word 97-2003",
    ".wps": "WPS Writer",
    ".rtf": "RTF",
    ".odt": "OpenDocument text",
    ".ppt": "PowerPoint 97-2003",
    ".dps": "WPS Presentation",
    ".odp": "OpenDocument presentation",
    ".et": "WPS Spreadsheets",
    ".ods": "OpenDocument spreadsheet",
}
INSTALL = (
    "install LibreOffice (Debian: libreoffice-core-nogui with libreoffice-writer-nogui, "
    "-calc-nogui and -impress-nogui; scripts/libreoffice.sh does it; the Docker image has it)"
)
PR_SET_PDEATHSIG = 1
_profile: Path | None = None  # this process's LibreOffice profile, made on first use


def soffice() -> str | None:
    """The LibreOffice executable, or None when it is not installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def _die_with_parent() -> None:  # (in the child, before exec)
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _profile_dir() -> Path:
    global _profile
    if _profile is None or not _profile.is_dir():
        _profile = Path(tempfile.mkdtemp(prefix=f"rsvc-lo-{os.getpid()}-"))
    return _profile


def convert(data: bytes, suffix: str, target: str, timeout_s: float) -> bytes:
    """``data`` (a ``suffix`` file) converted by LibreOffice to ``target`` (``docx``,
    ``xlsx``, ``pptx``); DocumentError when LibreOffice is missing or cannot read it."""
    exe = soffice()
    what = NAMES.get(suffix, suffix)
    if exe is None:
        raise DocumentError(f"{suffix} ({what}) files are read through LibreOffice: {INSTALL}")
    with tempfile.TemporaryDirectory(prefix="rsvc-convert-") as work:
        source = Path(work) / f"document{suffix}"
        source.write_bytes(data)
        command = [
            exe,
            f"-env:UserInstallation={_profile_dir().as_uri()}",
            "--headless",
            "--norestore",
            "--nologo",
            "--nolockcheck",
            "--convert-to",
            target,
            "--outdir",
            work,
            str(source),
        ]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                timeout=max(1.0, timeout_s),
                preexec_fn=_die_with_parent,
                env={**os.environ, "HOME": work, "SAL_USE_VCLPLUGIN": "svp"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise DocumentError(
                f"LibreOffice took more than {timeout_s:.0f} s to convert this {what} file "
                "(--doc-timeout)"
            ) from None
        except OSError as exc:
            raise DocumentError(f"LibreOffice could not be started ({exc}): {INSTALL}") from None
        converted = Path(work) / f"document.{target}"
        if not converted.is_file():
            said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
            detail = next((line for line in reversed(said) if "rror" in line), "")
            raise DocumentError(
                f"LibreOffice could not read this {what} file"
                + (f" ({detail[:200]})" if detail else "")
                + ": it may be damaged, password-protected, or not what its name says"
            )
        return converted.read_bytes()
