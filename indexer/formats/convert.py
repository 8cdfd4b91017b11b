"""Old and Chinese office formats, converted by LibreOffice and read by the parsers we have.

A company share holds Word 97-2003 (``.doc``), PowerPoint 97-2003 (``.ppt``), RTF,
OpenDocument (``.odt``, ``.odp``) and WPS Office's own formats (``.wps``, ``.dps``: WPS writes
them as the 97-2003 binary formats or as Office Open XML). No well-kept Python library reads
them, and LibreOffice reads them all: each file is converted headless to ``.docx`` or
``.pptx`` and handed to ``formats.office``, so a table in a ``.doc`` becomes rows that name
their columns, as in a ``.docx``.

Spreadsheets (``.ods``, WPS ``.et``) are not converted: LibreOffice recalculates volatile
functions (``NOW()``, ``INFO()``, ``CELL()``, ``RAND()``) on every load even when its profile
says never to recalculate, so the worker's clock, host and paths would replace what the
author saved; ``formats.sheets`` reads their saved values itself. The profile still says
never (``ODFRecalcMode``, ``OOXMLRecalcMode``) for a spreadsheet embedded in a document.

The conversion runs inside the document's worker: ``soffice`` inherits the worker's memory cap
(``RLIMIT_AS``), gets the document's remaining time as its timeout, and dies with the worker
(Linux's parent-death signal). Each worker keeps one LibreOffice profile for its lifetime: the
first conversion creates it (about 1.5 s here), the next ones take about 0.6 s. The profile
lives in the worker's temporary folder, which the worker's parent removes when it ends.

LibreOffice stays in a box. A document can link a picture at any address (a cloud's metadata
service included) or a file anywhere on the host; LibreOffice would fetch or read it while it
converts. Its profile therefore blocks every link from a document (``BlockUntrustedRefererLinks``,
active content off, links never updated), and, where the host allows a process its own network
namespace (root, or unprivileged user namespaces), ``soffice`` runs in an empty one: no route
anywhere, loopback included. An archive (OpenDocument, an Office Open XML file given another
name) passes the readers' unpacked-size and entry-count limits before LibreOffice sees it.

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
}
NAMES = {
    ".doc": "Word 97-2003",
    ".wps": "WPS Writer",
    ".rtf": "RTF",
    ".odt": "OpenDocument text",
    ".ppt": "PowerPoint 97-2003",
    ".dps": "WPS Presentation",
    ".odp": "OpenDocument presentation",
}
INSTALL = (
    "install LibreOffice (Debian: libreoffice-core-nogui with libreoffice-writer-nogui, "
    "-calc-nogui and -impress-nogui; scripts/libreoffice.sh does it; the Docker image has it)"
)
PR_SET_PDEATHSIG = 1
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
_profile: Path | None = None  # this process's LibreOffice profile, made on first use
# A profile that never follows what a document links: no linked picture, file or data source
# is fetched or read, no macro or active content runs, no link is updated on load.
_SECURITY = "/org.openoffice.Office.Common/Security/Scripting"
_LOCKED_DOWN = (
    (_SECURITY, "BlockUntrustedRefererLinks", "true"),
    (_SECURITY, "DisableActiveContent", "true"),
    (_SECURITY, "MacroSecurityLevel", "3"),
    ("/org.openoffice.Office.Writer/Content/Update", "Link", "0"),  # never
    ("/org.openoffice.Office.Calc/Content/Update", "Link", "1"),  # never
    ("/org.openoffice.Office.Common/Misc", "UseLocking", "false"),
    ("/org.openoffice.Office.Calc/Formula/Load", "ODFRecalcMode", "1"),  # never
    ("/org.openoffice.Office.Calc/Formula/Load", "OOXMLRecalcMode", "1"),  # never
)


def _registry() -> str:
    """The profile's settings file (``registrymodifications.xcu``) of ``_LOCKED_DOWN``."""
    items = "".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
        f"<value>{value}</value></prop></item>\n"
        for path, name, value in _LOCKED_DOWN
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"{items}</oor:items>\n"
    )


def soffice() -> str | None:
    """The LibreOffice executable, or None when it is not installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def _boxed() -> None:  # (in the child, before exec)
    """Die with the worker, and leave the network where the host allows it: a network
    namespace of its own (as root), else a user namespace with one (unprivileged), else
    the profile's blocks alone."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if libc.unshare(CLONE_NEWNET) != 0:
        libc.unshare(CLONE_NEWUSER | CLONE_NEWNET)


def _profile_dir() -> Path:
    global _profile
    if _profile is None or not _profile.is_dir():
        _profile = Path(tempfile.mkdtemp(prefix=f"rsvc-lo-{os.getpid()}-"))
        (_profile / "user").mkdir()
        (_profile / "user" / "registrymodifications.xcu").write_text(_registry())
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
                preexec_fn=_boxed,
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
