"""Text from pictures of text: scanned PDF pages and image files (issue #34 §2).

The engine is RapidOCR 3 (PP-OCRv6 detection and recognition, Chinese and English) on
``onnxruntime`` on the CPU. Its models ship inside the ``rapidocr`` wheel, so nothing is
downloaded at run time; it is loaded once per worker process, before the worker caps its
memory. Settings chosen by measurement on this project's 2-core machine (docs/indexer.md,
"OCR"): one thread per worker (the workers are the parallelism), no per-line direction
classifier (it cost 10 % and does not turn a page: a page fed sideways or upside down is
detected from what the first pass read and read again turned, ``_upright``), detection on the
page scaled to at most 960 px with boxes kept from a score of 0.3, and recognition one line at
a time (batches of six raised the peak memory by 250 MB and were slower on one thread). A
skewed page's boxes are levelled before layout (``ocr_layout.level``); a page with red ink is read
through its red channel, then the red ink alone (``read_pixels``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import resource
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from indexer.documents import DocumentError
from indexer.formats.base import Parsed, Part, Reading
from indexer.formats.ocr_layout import layout, level

# Below this mean line confidence a page may be upside down (measured: 0.65 for a page turned
# 180°, 0.99 and above for upright scans, photos and stamped pages alike).
UPRIGHT_CONFIDENCE = 0.85
# A page with at least this share of red pixels has red ink read apart (a seal, a letterhead).
RED_SHARE = 0.002
MAX_SIDE = 4096  # pixels: a larger image is scaled down before OCR (text stays legible)
PARAMS: dict[str, Any] = {
    "Global.log_level": "error",
    "Global.use_cls": False,
    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    "Det.limit_type": "max",
    "Det.limit_side_len": 960,
    # Boxes the detector scores from 0.3 (its default 0.5 dropped a whole line of a 300-dpi
    # page in 24; what it adds is judged again by recognition's own confidence floor).
    "Det.box_thresh": 0.3,
    "Rec.rec_batch_num": 1,
}

_engine: Any = None
_libc: Any = None
# Set by a worker process (indexer.workers): address space an OCR page may reserve past the
# worker's cap, given for the page and taken back after it (what the engine keeps reserved is
# counted by the worker after its document: indexer.workers.pool).
SLACK_BYTES = 0


@contextlib.contextmanager
def _room() -> Iterator[None]:
    """Raise this process's address-space cap by ``SLACK_BYTES`` for one page (a no-op when
    there is no cap or no slack)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if not SLACK_BYTES or soft == resource.RLIM_INFINITY:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (soft + SLACK_BYTES, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _give_back() -> None:
    """Return the heap's free pages to the system after a page (glibc's ``malloc_trim``).

    Each page's images and line crops are allocations of new sizes; glibc kept the freed ones
    in fragments, and a worker's memory grew by about 10 MB a page, so a 100-page scan passed
    its --doc-memory-mb. Trimmed after every page it stays flat (measured: 240 MB resident
    after 24 pages, against 480 MB untrimmed). Elsewhere than glibc it does nothing.
    """
    global _libc
    if _libc is None:
        import ctypes
        import ctypes.util

        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


def _without_memory_patterns() -> None:
    """Have RapidOCR's onnxruntime sessions made without the memory-pattern cache.

    onnxruntime keeps an allocation plan per input shape it has seen; every text line has its
    own width, so a worker's memory grew with each page it read (measured: 600 MB of address
    space past the start after four scanned documents, 440 MB without the cache, at the same
    speed). RapidOCR exposes no option for it: its session-options factory is wrapped to turn
    it off, and left alone if a later version names it differently.
    """
    try:
        from rapidocr.inference_engine.onnxruntime import main as ort_engine
    except ImportError:  # pragma: no cover - another engine layout
        return
    session_class = getattr(ort_engine, "OrtInferSession", None)
    factory = getattr(session_class, "_init_sess_opts", None)
    if factory is None or getattr(factory, "_rsvc_wrapped", False):
        return

    def options(cfg: Any) -> Any:
        made = factory(cfg)
        made.enable_mem_pattern = False
        return made

    options._rsvc_wrapped = True  # type: ignore[attr-defined]
    session_class._init_sess_opts = staticmethod(options)  # type: ignore[union-attr]


def engine() -> Any:
    """The process's OCR engine (loaded on first use; a worker loads it before its cap)."""
    global _engine
    if _engine is None:
        from rapidocr import RapidOCR

        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        _without_memory_patterns()
        _engine = RapidOCR(params=PARAMS)
    return _engine


@dataclass(frozen=True, slots=True)
class PageText:
    """What OCR read on one page: its lines in reading order, and their mean confidence."""

    text: str
    confidence: float
    lines: int


def _recognise(pixels: Any) -> Any:
    """One pass of the engine over a page (its reserve given for the pass)."""
    try:
        with _room():
            result = engine()(pixels)
            _give_back()
    except Exception as exc:  # onnxruntime reports a failed allocation as its own error
        if "bad_alloc" in str(exc):
            raise MemoryError from exc  # the worker's budget: replaced, reason says the limit
        first = str(exc).strip().splitlines()[-1:] or [""]
        raise DocumentError(
            f"OCR failed: {type(exc).__name__}: {first[0][:300] or 'the engine gave no reason'}"
            " (is the image a page of text? its size and shape are in the file)"
        ) from exc
    return result


def _weight(result: Any) -> float:
    """How much a pass read: characters, each by its line's confidence."""
    return sum(
        float(s) * len(t) for t, s in zip(result.txts or (), result.scores or (), strict=False)
    )


def _shape(result: Any) -> tuple[int, int]:
    """How many of the lines read are taller than wide, and how many wider than tall."""
    texts = list(result.txts or ())
    tall = wide = 0
    for box, text in zip(result.boxes if texts else (), texts, strict=True):
        if len(text.strip()) < 3:
            continue  # (a digit or a mark: no shape to tell)
        width = float(max(p[0] for p in box) - min(p[0] for p in box))
        height = float(max(p[1] for p in box) - min(p[1] for p in box))
        tall += height > 1.5 * width
        wide += width > 1.5 * height
    return tall, wide


def _upright(pixels: Any, result: Any) -> tuple[Any, int]:
    """The page read the right way up, and the quarter turns that took. A page fed sideways
    shows as lines taller than wide (the engine reads them, but bottom line first), one upside
    down as lines read with low confidence; such a page is read again turned (90° both ways,
    or 180°) and the pass that read most kept; so is a page where nothing was found (blank,
    or the detector missed sideways lines). A page read with low confidence whose lines show
    no shape (a sideways page where the detector found one stray box) is read turned all three
    ways, and a pass whose lines lie wide wins over one still sideways. An upright page with
    text — nearly every page — costs nothing more (measured in bench.formats:
    scan-rot90/180/270, pdf-rot90/180/270; docs/indexer.md "OCR").
    """
    import numpy as np

    texts = list(result.txts or ())
    tall, wide = _shape(result)
    confident = bool(texts) and statistics.fmean(map(float, result.scores)) >= UPRIGHT_CONFIDENCE
    if tall <= wide and confident:
        return result, 0
    sideways = tall > wide or not texts  # (nothing found: a blank page, or lines sideways)
    shapeless = not sideways and tall == wide  # (no line to tell which way the page lies)
    turns = (1, 2, 3) if shapeless else (1, 3) if sideways else (2,)  # counter-clockwise
    passes = [(_recognise(np.ascontiguousarray(np.rot90(pixels, k))), k) for k in turns]

    def lying_wide(read: Any) -> bool:
        down, across = _shape(read)
        return across >= down

    best, turn = max(passes, key=lambda p: (lying_wide(p[0]), _weight(p[0])))
    # Sideways, a turned pass that reads about as much wins (the first read its lines in the
    # wrong order); otherwise it must read more. Text really set vertically reads worse turned.
    if _weight(best) > (0.9 if sideways or shapeless else 1.0) * _weight(result):
        return best, turn
    return result, 0


def _red_ink(pixels: Any) -> Any:
    """Where the page is red ink (a seal, a red letterhead), as a mask, or None for a page
    with little or none. Looked for on every fourth pixel first, so a page without costs
    next to nothing."""
    import numpy as np

    def red(p: Any) -> Any:
        r = p[..., 0].astype(np.int16)
        return (r > 120) & (r - np.maximum(p[..., 1], p[..., 2]) > 60)

    if pixels.ndim != 3 or pixels.shape[2] < 3 or red(pixels[::4, ::4]).mean() < RED_SHARE:
        return None
    return red(pixels)


def read_pixels(pixels: Any) -> PageText:
    """OCR one page given as an RGB ``numpy`` array, turned upright (``_upright``), its lines
    levelled (``ocr_layout.level``) and laid out (``ocr_layout.layout``).

    A page with red ink on it is read as two: the page seen through its red channel, where red
    is as light as paper (a seal over the text no longer joins the lines under it into one
    box), then the red ink alone (a red letterhead, a seal's words). Red lines above the
    page's first line come before its text, the rest after it, each as its own paragraph."""
    import numpy as np

    red = _red_ink(pixels)
    plain = pixels if red is None else np.ascontiguousarray(np.repeat(pixels[..., :1], 3, axis=2))
    result, turn = _upright(plain, _recognise(plain))
    texts = [str(t) for t in result.txts or ()]
    scores = [float(s) for s in result.scores or ()]
    boxes = level(result.boxes, np.rot90(plain, turn).shape) if texts else []
    above = below = ""
    if red is not None:
        ink = np.where(np.rot90(red, turn), np.uint8(0), np.uint8(255))  # (uint8 throughout)
        found = _recognise(np.ascontiguousarray(np.repeat(ink[..., None], 3, axis=2)))
        words = [i for i, t in enumerate(found.txts or ()) if any(c.isalnum() for c in t)]
        if words:  # (a seal's star or ring read as a mark is left out)
            red_texts = [str(found.txts[i]) for i in words]
            scores += [float(found.scores[i]) for i in words]
            red_boxes = level(np.asarray(found.boxes)[words], ink.shape)
            first = min((float(b[:, 1].min()) for b in boxes), default=math.inf)
            high = [i for i, b in enumerate(red_boxes) if float(b[:, 1].max()) < first]
            low = [i for i in range(len(red_texts)) if i not in high]
            if high:
                above = layout([red_texts[i] for i in high], [red_boxes[i] for i in high])
            if low:
                below = layout([red_texts[i] for i in low], [red_boxes[i] for i in low])
    if not scores:
        return PageText("", 0.0, 0)
    text = layout(texts, boxes) if texts else ""
    joined = "\n\n".join(t for t in (above, text, below) if t)
    return PageText(joined, round(statistics.fmean(scores), 4), len(scores))


def ocr_part(page: PageText, number: int | None) -> Part:
    """A page's text as a part, marked as read by OCR with its confidence (and page)."""
    marks: dict[str, Any] = {"ocr": True, "ocr_confidence": page.confidence}
    if number is not None:
        marks["page"] = number
    return Part(page.text, marks)


def parse_image(data: bytes, reading: Reading) -> Parsed:
    """An image file (PNG, JPEG, TIFF with its pages, BMP, WebP) read by OCR."""
    import numpy as np
    from PIL import Image, ImageSequence, UnidentifiedImageError

    if reading.ocr == "off":
        raise DocumentError("an image is read only by OCR, and --ocr is off")
    Image.MAX_IMAGE_PIXELS = None  # our own limit below, with its option in the reason
    try:
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise DocumentError(f"image cannot be read: {exc}") from exc
    with image:
        reading.budget.check_pixels(*image.size)
        fmt = (image.format or "image").lower()
        count = int(getattr(image, "n_frames", 1))
        reading.budget.check_pages(count, "the image has", "frames")
        parts: list[Part] = []
        try:
            for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
                reading.budget.check_pixels(*frame.size)
                reading.grant(reading.budget.ocr_page_seconds)
                picture = frame.convert("RGB")
                picture.thumbnail((MAX_SIDE, MAX_SIDE))
                page = read_pixels(np.asarray(picture))
                if page.text:
                    parts.append(ocr_part(page, number if count > 1 else None))
        except (OSError, ValueError, SyntaxError) as exc:  # truncated or damaged image data
            raise DocumentError(f"image cannot be read: {type(exc).__name__}: {exc}") from exc
    info = {"format": fmt, "pages": count, "ocr_pages": len(parts)}
    return Parsed(tuple(parts), info=info)


def preload() -> None:
    """Load the engine and its two models now, by reading a line of text drawn here (a worker
    does, before it caps its memory: RapidOCR loads each model on first use)."""
    import numpy as np
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (480, 64), "white")
    ImageDraw.Draw(picture).text((10, 20), "retrieval-svc 0123456789", fill="black")
    read_pixels(np.asarray(picture.resize((960, 128))))
