"""`cascade.media.load_image`, the one place anything becomes an `Image`: every PIL mode converted
right, only raster formats opened, sizes refused from the header, errors that say what is wrong.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image as PILImage

from cascade.artifacts import Image
from cascade.errors import InputError
from cascade.media import ImageTooLarge, load_image


def _png(im: PILImage.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def test_16_bit_grey_is_scaled_not_clipped(tmp_path):
    ramp = np.linspace(0, 65535, 256 * 64).reshape(64, 256).astype(np.uint16)
    path = tmp_path / "scan16.png"
    PILImage.fromarray(ramp).save(path)
    assert PILImage.open(path).mode.startswith("I")  # a real 16-bit file, as Pillow opens it
    px = load_image(path).pixels
    assert abs(px.mean() - 127.5) < 1.5  # Pillow's own convert("RGB") gives ~254 (white)
    assert px[0, 0].tolist() == [0, 0, 0] and px[-1, -1].tolist() == [255, 255, 255]
    assert np.all(np.diff(px[:, :, 0].astype(int).ravel()) >= 0)  # the ramp stays a ramp


@pytest.mark.parametrize(
    "mode, values, expected",
    [
        ("I", [0, 30000, 65535], [0, 117, 255]),  # 16-bit samples in a 32-bit image
        ("I", [0, 128, 255], [0, 128, 255]),  # 8-bit samples in a 32-bit image
        ("F", [0.0, 0.5, 1.0], [0, 128, 255]),  # the [0, 1] float convention
        ("F", [-1.0, 0.0, 3.0], [0, 64, 255]),  # any other range: its own min..max
    ],
)
def test_wide_samples_are_scaled_to_their_range(mode, values, expected):
    arr = np.array([values], dtype=np.int32 if mode == "I" else np.float32)
    got = load_image(PILImage.fromarray(arr, mode)).pixels
    assert got[0, :, 0].tolist() == expected and got.shape == (1, 3, 3)


def test_transparency_is_flattened_onto_white():
    # Black text on a transparent background (a logo, a screenshot): must stay readable.
    rgba = np.zeros((10, 10, 4), np.uint8)
    rgba[4:6, 2:8] = (0, 0, 0, 255)
    px = load_image(PILImage.fromarray(rgba, "RGBA")).pixels
    assert px[0, 0].tolist() == [255, 255, 255] and px[5, 5].tolist() == [0, 0, 0]
    la = load_image(PILImage.fromarray(rgba, "RGBA").convert("LA")).pixels
    assert la[0, 0].tolist() == [255, 255, 255] and la[5, 5].tolist() == [0, 0, 0]
    pal = PILImage.new("P", (4, 4), 0)
    pal.putpalette([0, 0, 0, 200, 10, 10] + [0] * 762)
    pal.putpixel((1, 1), 1)
    pal.info["transparency"] = 0  # palette entry 0 (black) is transparent
    ppx = load_image(PILImage.open(io.BytesIO(_png(pal)))).pixels
    assert ppx[0, 0].tolist() == [255, 255, 255] and ppx[1, 1].tolist() == [200, 10, 10]
    assert load_image(rgba).pixels[0, 0].tolist() == [255, 255, 255]  # HxWx4 arrays too


@pytest.mark.parametrize("mode", ["1", "L", "P", "CMYK", "YCbCr", "LAB", "HSV", "RGBX", "I;16"])
def test_every_mode_becomes_rgb_uint8(mode):
    src = PILImage.new("RGB", (6, 4), (10, 200, 30))
    im = (
        PILImage.fromarray(np.full((4, 6), 1000, np.uint16))
        if mode == "I;16"
        else src.convert(mode)
    )
    px = load_image(im).pixels
    assert px.shape == (4, 6, 3) and px.dtype == np.uint8
    if mode in ("CMYK", "RGBX"):
        assert px[0, 0].tolist() == [10, 200, 30]


def test_not_an_image_says_so_without_internals(tmp_path):
    import ultralytics  # noqa: F401  (it patches PIL.Image.open: the pi_heif error came from there)

    # Not an image; and EPS, which Pillow would hand to Ghostscript (a PostScript program).
    for data in (b"this is not an image", b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 1 1\n"):
        (tmp_path / "x.png").write_bytes(data)
        for value in (data, tmp_path / "x.png"):
            with pytest.raises(
                InputError, match=r"not a readable image \(unknown or unsupported"
            ) as e:
                load_image(value)
            assert "pi_heif" not in str(e.value) and "BytesIO" not in str(e.value)
    good = _png(PILImage.new("RGB", (40, 30), "red"))
    with pytest.raises(InputError, match="truncated or damaged"):
        load_image(good[: len(good) // 2])


def test_size_is_refused_from_the_header():
    big = _png(PILImage.new("L", (3000, 2000)))
    with pytest.raises(ImageTooLarge, match="6,000,000 pixels"):
        load_image(big, max_pixels=1_000_000)
    with pytest.raises(ImageTooLarge, match="max_side=2048"):
        load_image(big, max_side=2048)


def test_exif_orientation_is_applied():
    im = PILImage.new("RGB", (40, 20), "blue")
    exif = im.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise to view
    buf = io.BytesIO()
    im.save(buf, format="JPEG", exif=exif)
    assert load_image(buf.getvalue()).pixels.shape == (40, 20, 3)


def test_arrays_and_unknown_types():
    assert load_image(np.zeros((5, 7), np.uint8)).pixels.shape == (5, 7, 3)
    with pytest.raises(InputError, match="uint8"):
        load_image(np.zeros((5, 7), np.float32))
    with pytest.raises(InputError, match="expected an Image"):
        load_image(42)


def test_every_entry_point_is_the_same_function(tmp_path):
    from cascade.inputs import coerce
    from cascade.serve.config import ServeConfig
    from cascade.serve.media import _decode_image
    from cascade.vlm.media import as_images

    ramp = np.linspace(0, 65535, 64 * 32).reshape(32, 64).astype(np.uint16)
    path = tmp_path / "s.png"
    PILImage.fromarray(ramp).save(path)
    want = load_image(path).pixels
    got = [
        Image.open(path).pixels,
        Image.from_pil(PILImage.open(path)).pixels,
        as_images([path])[0].pixels,
        coerce("im", "image", str(path)).pixels,
        coerce("ims", "images", [PILImage.open(path)])[0].pixels,
        _decode_image(path.read_bytes(), ServeConfig(), "p"),
    ]
    assert all(np.array_equal(g, want) for g in got)
