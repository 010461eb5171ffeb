"""A per-engine timeline picture of a simulated run (``nkic profile X.neff -o timeline.png``), like the timeline view
of neuron-profile: one row per engine and DMA queue of every core, each instruction a bar from its start to its
end, coloured by opcode, a time axis in µs and a legend of the busiest opcodes.

Plain numpy rasterisation and a small PNG writer (zlib, RGB, filter 0): no plotting library. Text uses a built-in
3x5 pixel font drawn at twice its size (letters, digits and a little punctuation; lower case prints as upper case).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np

from nkic.support import safeio
from nkic.runtime.simulator import Profile, ProfileEvent
from nkic.target.machine import ENGINE_NAMES

# ---------------------------------------------------------------------------------------------------------------
# PNG


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(image: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 RGB image as PNG bytes (8-bit truecolour, no interlace, filter 0 on every row)."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
    h, w, _ = image.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), image.reshape(h, w * 3)], axis=1)
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
            + _chunk(b"IEND", b""))  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# text: a 3x5 font, each glyph five rows of three bits

_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111", "F": "111100110100100",
    "G": "011100101101011", "H": "101101111101101", "I": "111010010010111", "J": "001001001101010",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011", "R": "110101110101101",
    "S": "011100010001110", "T": "111010010010010", "U": "101101101101111", "V": "101101101101010",
    "W": "101101111111101", "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    ".": "000000000000010", ":": "000010000010000", "-": "000000111000000", "/": "001001010100100",
    "%": "101001010100101", "(": "010100100100010", ")": "010001001001010", "_": "000000000000111",
    ",": "000000000010100", " ": "000000000000000", "=": "000111000111000", "+": "000010111010000",
}
SCALE = 2
CHAR_W, CHAR_H = 4 * SCALE, 5 * SCALE  # a glyph and its one-column gap


def _glyph(ch: str) -> np.ndarray:
    bits = _GLYPHS.get(ch.upper(), _GLYPHS["-"])  # a character the font lacks shows as a dash
    g = np.array([int(b) for b in bits], bool).reshape(5, 3)
    return g.repeat(SCALE, 0).repeat(SCALE, 1)


def draw_text(image: np.ndarray, x: int, y: int, text: str, color: Sequence[int] = (0, 0, 0)) -> None:
    """Draw ``text`` with its top-left corner at (x, y), clipped to the image."""
    h, w, _ = image.shape
    for i, ch in enumerate(text):
        x0 = x + i * CHAR_W
        g = _glyph(ch)
        gy, gx = g.shape
        ys, xs = slice(max(y, 0), min(y + gy, h)), slice(max(x0, 0), min(x0 + gx, w))
        if ys.start >= ys.stop or xs.start >= xs.stop:
            continue
        mask = g[ys.start - y : ys.stop - y, xs.start - x0 : xs.stop - x0]
        image[ys, xs][mask] = color


# ---------------------------------------------------------------------------------------------------------------
# the timeline

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
           (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207), (57, 59, 121), (173, 73, 74)]  # fmt: skip
BACKGROUND, ROW_SHADE, INK, GRID = (255, 255, 255), (240, 240, 240), (30, 30, 30), (200, 200, 200)
ROW_H, ROW_GAP, LEFT, RIGHT, TOP = 26, 4, 96, 16, 40


def _tracks(profile: Profile) -> list[tuple[int, str]]:
    """(core, track) rows in display order: engines, then the DMA queues in use."""
    used = {(ev.core, ev.track) for ev in profile.events}
    rows = []
    for core in range(profile.num_cores):
        queues = sorted({t for c, t in used if c == core and t not in ENGINE_NAMES}, key=lambda t: int(t[1:]))
        rows += [(core, t) for t in list(ENGINE_NAMES) + queues if (core, t) in used]
    return rows


def _colors(events: Sequence[ProfileEvent]) -> dict[str, tuple[int, int, int]]:
    """Opcodes by total busy time, the busiest first, each a palette colour (the tail shares the last one)."""
    busy: dict[str, float] = {}
    for ev in events:
        busy[ev.mnemonic] = busy.get(ev.mnemonic, 0.0) + ev.dur_ns
    ranked = sorted(busy, key=lambda m: -busy[m])
    return {m: PALETTE[min(i, len(PALETTE) - 1)] for i, m in enumerate(ranked)}


def _tick_step(total_us: float, width: int) -> float:
    """A 1/2/5 x 10^k µs step giving ticks at least ~110 px apart."""
    target = total_us * 110 / max(width, 1)
    step = 10.0 ** np.floor(np.log10(max(target, 1e-6)))
    for m in (1, 2, 5, 10):
        if m * step >= target:
            return m * step
    return 10 * step


def _label(track: str, core: int, cores: int) -> str:
    name = track.upper()
    return f"{core}:{name}" if cores > 1 else name


def render(profile: Profile, width: int = 1600, title: str = "") -> np.ndarray:
    """The timeline of ``profile`` as an (H, width, 3) uint8 RGB image."""
    rows = _tracks(profile)
    colors = _colors(profile.events)
    legend = list(colors)[: len(PALETTE) - 1] + (["other"] if len(colors) >= len(PALETTE) else [])
    legend_rows = (len(legend) + 3) // 4
    height = TOP + len(rows) * (ROW_H + ROW_GAP) + 40 + legend_rows * 18 + 8
    img = np.full((height, width, 3), BACKGROUND, np.uint8)
    total = max(profile.total_ns, 1e-9)
    plot_w = width - LEFT - RIGHT
    scale = plot_w / total
    head = title or f"{profile.target}"
    draw_text(img, 8, 8, f"{head}  total {total / 1000:.2f} us  {len(profile.events)} instructions", INK)
    row_of = {r: i for i, r in enumerate(rows)}
    for (core, track), i in row_of.items():
        y = TOP + i * (ROW_H + ROW_GAP)
        img[y : y + ROW_H, LEFT : LEFT + plot_w] = ROW_SHADE
        busy = sum(ev.dur_ns for ev in profile.events if ev.core == core and ev.track == track)
        draw_text(img, 6, y + 1, _label(track, core, profile.num_cores), INK)
        draw_text(img, 6, y + 1 + CHAR_H + 1, f"{100 * busy / total:.0f}%", (110, 110, 110))
    bottom = TOP + len(rows) * (ROW_H + ROW_GAP)
    step = _tick_step(total / 1000, plot_w)
    t = 0.0
    while t <= total / 1000 + 1e-9:
        x = LEFT + int(round(t * 1000 * scale))
        img[TOP - 4 : bottom, min(x, width - 1)] = GRID
        text = f"{t:g}"
        draw_text(img, x - len(text) * CHAR_W // 2, bottom + 4, text, INK)
        t += step
    draw_text(img, LEFT + plot_w - 2 * CHAR_W, bottom + 4 + CHAR_H + 4, "us", INK)
    for ev in profile.events:  # bars last, over the grid
        y = TOP + row_of[(ev.core, ev.track)] * (ROW_H + ROW_GAP)
        x0 = LEFT + int(ev.start_ns * scale)
        x1 = max(x0 + 1, LEFT + int(round(ev.end_ns * scale)))
        img[y + 2 : y + ROW_H - 2, x0 : min(x1, LEFT + plot_w)] = colors[ev.mnemonic]
    ly = bottom + 4 + 2 * (CHAR_H + 4) + 4
    for k, m in enumerate(legend):
        x, y = 8 + (k % 4) * (width // 4), ly + (k // 4) * 18
        img[y : y + CHAR_H, x : x + CHAR_H] = colors.get(m, PALETTE[-1])
        draw_text(img, x + CHAR_H + 6, y, m, INK)
    return img


def write_timeline(profile: Profile, path: str, width: int = 1600, title: str = "") -> int:
    """Render and write the PNG; returns its size in bytes."""
    data = png_bytes(render(profile, width, title))
    safeio.write_bytes(path, data)  # atomic, never through a symbolic link
    return len(data)
