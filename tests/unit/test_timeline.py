"""``nkic profile X.neff -o timeline.png``: the PNG writer, the rasterised timeline, and the command."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from nkic.runtime.simulator import Profile, ProfileEvent
from nkic.runtime.timeline_png import LEFT, PALETTE, RIGHT, ROW_H, TOP, png_bytes, render

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def decode_png(data: bytes) -> np.ndarray:
    """An independent reader for what png_bytes writes: every chunk's CRC checked, RGB 8-bit, filter 0."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc
        chunks.append((kind, body))
        pos += 12 + n
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    w, h, depth, ctype, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, ctype) == (8, 2)
    raw = np.frombuffer(zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT")), np.uint8)
    rows = raw.reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()  # filter 0
    return rows[:, 1:].reshape(h, w, 3)


def test_png_round_trip() -> None:
    img = np.random.default_rng(0).integers(0, 256, (7, 13, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(png_bytes(img)), img)
    with pytest.raises(ValueError):
        png_bytes(np.zeros((4, 4), np.uint8))


def test_bars_where_the_events_are() -> None:
    prof = Profile("gen3", 1, [ProfileEvent(0, "pe", "MATMUL", 0, 0.0, 500.0),
                               ProfileEvent(0, "act", "ACTIVATE", 1, 500.0, 500.0),
                               ProfileEvent(0, "q0", "DMA_COPY", 2, 250.0, 250.0)], 1000.0)  # fmt: skip
    width = 1000
    img = decode_png(png_bytes(render(prof, width)))
    plot_w = width - LEFT - RIGHT

    def pixel(row: int, t_ns: float) -> tuple[int, ...]:
        return tuple(img[TOP + row * (ROW_H + 4) + ROW_H // 2, LEFT + int(t_ns / 1000 * plot_w)])

    # colours go to opcodes by busy time, the busiest first (a tie keeps first-seen order)
    colors = {m: PALETTE[i] for i, m in enumerate(["MATMUL", "ACTIVATE", "DMA_COPY"])}
    rows = {"pe": 0, "act": 1, "q0": 2}  # engines first, then the queues in use; idle engines get no row
    assert pixel(rows["pe"], 250) == colors["MATMUL"] and pixel(rows["pe"], 750) != colors["MATMUL"]
    assert pixel(rows["act"], 750) == colors["ACTIVATE"] and pixel(rows["act"], 250) != colors["ACTIVATE"]
    assert pixel(rows["q0"], 375) == colors["DMA_COPY"] and pixel(rows["q0"], 100) != colors["DMA_COPY"]
    assert img.shape[1] == width and img.shape[0] > TOP + 3 * ROW_H


def test_cli_profile(tmp_path: Path) -> None:
    py = [sys.executable, "-m", "nkic"]
    subprocess.run([*py, "compile", f"{KERNELS / 'softmax.py'}:softmax", "--arg", "x=float32[128,256]", "-o",
                    str(tmp_path / "k.neff")], check=True, capture_output=True)  # fmt: skip
    r = subprocess.run([*py, "profile", str(tmp_path / "k.neff"), "-o", str(tmp_path / "t.png"), "--width", "800",
                        "--trace", str(tmp_path / "t.json")], check=True, capture_output=True, text=True)  # fmt: skip
    img = decode_png((tmp_path / "t.png").read_bytes())
    assert img.shape[1] == 800
    assert "busiest kernel lines" in r.stdout and "softmax.py:" in r.stdout  # the NEFF has source info
    assert "target gen3:" in r.stdout and (tmp_path / "t.json").stat().st_size > 0
    bad = subprocess.run([*py, "profile", str(tmp_path / "k.neff"), "-o", str(tmp_path / "u.png"), "--width", "5"],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode != 0 and "--width 5" in bad.stderr
