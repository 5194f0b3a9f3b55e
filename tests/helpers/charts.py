"""Checks that a PNG is a real chart, not a blank (shared by the chart tests)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def idle_band_pixels(img: np.ndarray) -> int:
    """Pixels of the light-red 'VRAM held idle' band (#d62728 at 15 % on white)."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return int(((r > 240) & (abs(g - 223) <= 6) & (abs(b - 223) <= 6)).sum())


def assert_real_picture(png: bytes) -> np.ndarray:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 40_000, len(png)
    img = pixels(png)
    assert img.shape[0] >= 500 and img.shape[1] >= 1200
    assert float(img.std()) > 20.0  # a blank or single-colour image is ~0
    non_white = (img.sum(axis=2) < 700).mean()
    assert 0.03 < non_white < 0.6, non_white
    return img
