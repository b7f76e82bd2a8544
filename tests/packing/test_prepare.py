"""The per-image transform of im2rec's pack mode: geometry, EXIF rotation, truncation, decoders, ``fast``."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mxrec.errors import ImageDecodeError, OptionError
from mxrec.image.codec import decode_image, encode_image
from mxrec.image.headers import jpeg_header, truncation
from mxrec.packing.prepare import ImageTransform, center_square, cv2_size, reduction_factor

cv2 = pytest.importorskip("cv2")


@pytest.fixture
def jpeg(golden) -> bytes:
    return (golden / "im2rec" / "photos200" / "retina" / "retina_00004.jpg").read_bytes()


def with_exif_orientation(jpeg_bytes: bytes, orientation: int) -> bytes:
    """``jpeg_bytes`` with an APP1 EXIF segment whose IFD0 holds only the Orientation tag."""
    tiff = b"II*\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0) + b"\0" * 4
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 6 + len(tiff)) + b"Exif\x00\x00" + tiff
    return jpeg_bytes[:2] + app1 + jpeg_bytes[2:]


def test_shorter_side_rule_is_integer_division():
    assert cv2_size(371, 364, 128) == (128, 130)  # golden resize128: first record is 130 x 128
    assert cv2_size(300, 400, 128) == (170, 128)
    assert cv2_size(100, 100, 64) == (64, 64)
    assert cv2_size(10, 20, 64) == (128, 64)  # enlarging, as im2rec does


def test_center_square_keeps_the_middle():
    img = np.arange(5 * 8).reshape(5, 8)
    assert np.array_equal(center_square(img), img[:, 1:6])
    assert np.array_equal(center_square(img.T), img.T[1:6])


def jpeg_size(data: bytes) -> tuple[int, int]:
    frame = jpeg_header(data).frame
    return frame.height, frame.width


def test_jpeg_header_reads_frame_scan_and_orientation(jpeg):
    header = jpeg_header(jpeg)
    frame = header.frame
    assert (frame.height, frame.width) == decode_image(jpeg).shape[:2]
    assert (frame.marker, frame.precision, frame.components) == (0xC0, 8, 3)
    assert jpeg[header.scan:header.scan + 2] == b"\xff\xda"
    assert header.orientation == 1
    rotated = jpeg_header(with_exif_orientation(jpeg, 6))
    assert rotated.frame == frame and rotated.orientation == 6
    assert jpeg_header(b"\x89PNG\r\n\x1a\n") is None
    assert jpeg_header(b"") is None
    cut = jpeg_header(jpeg[:20])
    assert cut.frame is None and cut.scan is None


def test_truncation_finds_cut_files(jpeg):
    png = encode_image(decode_image(jpeg), ".png", 1)
    assert truncation(jpeg) is None
    assert truncation(png) is None
    assert truncation(jpeg + b"\0" * 10) is None  # trailing padding after the end marker is fine
    assert truncation(b"") == "empty file"
    assert "truncated JPEG" in truncation(jpeg[:-2])
    assert "truncated JPEG" in truncation(jpeg[:len(jpeg) // 2])
    assert "truncated PNG" in truncation(png[:len(png) // 2])
    # an EXIF thumbnail's end-of-image marker does not make a cut main image complete
    thumb = encode_image(np.zeros((8, 8, 3), np.uint8))
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + len(thumb)) + thumb
    assert "truncated JPEG" in truncation(jpeg[:2] + app1 + jpeg[2:len(jpeg) // 2])


@pytest.mark.parametrize("data", [b"", b"not an image at all", b"\xff\xd8\xff\xe0 cut"])
def test_bad_image_bytes_raise_decode_errors(data):
    for transform in (ImageTransform(), ImageTransform(pass_through=True)):
        if transform.pass_through and data == b"not an image at all":
            assert transform.apply(data) == data  # pass-through stores any non-empty, uncut bytes
            continue
        with pytest.raises(ImageDecodeError, match="the-file"):
            transform.apply(data, what="the-file")


def test_exif_rotation_as_imread(jpeg, tmp_path):
    rotated = with_exif_orientation(jpeg, 6)
    (tmp_path / "r.jpg").write_bytes(rotated)
    height, width = jpeg_size(jpeg)
    for color, shape in ((1, (width, height, 3)), (0, (width, height)), (-1, (height, width, 3))):
        out = decode_image(ImageTransform(color=color, encoding=".png").apply(rotated), -1)
        assert out.shape == shape
        assert np.array_equal(out, cv2.imread(str(tmp_path / "r.jpg"), color))


@pytest.mark.parametrize("options", [dict(color=2), dict(encoding=".bmp"), dict(resize=-1)])
def test_bad_options_are_rejected(options):
    with pytest.raises(OptionError):
        ImageTransform(**options)


def test_reduction_factor_keeps_the_target():
    assert reduction_factor(1000, 1200, 256) == 2
    assert reduction_factor(1100, 2000, 256) == 4
    assert reduction_factor(4096, 4096, 256) == 8
    assert reduction_factor(511, 2000, 256) == 1


@pytest.fixture
def large_jpeg(jpeg) -> bytes:
    img = decode_image(jpeg, 1)
    return encode_image(cv2.resize(img, (img.shape[1] * 3, img.shape[0] * 3)), ".jpg", 95)


@pytest.mark.parametrize("center_crop", [False, True])
@pytest.mark.parametrize("color", [1, 0])
def test_fast_reduced_decode_gives_im2rec_size_and_close_pixels(large_jpeg, center_crop, color):
    options = dict(resize=256, center_crop=center_crop, color=color, encoding=".png")
    exact = decode_image(ImageTransform(**options).apply(large_jpeg), -1)
    reduced = decode_image(ImageTransform(fast=True, **options).apply(large_jpeg), -1)
    assert reduced.shape == exact.shape
    difference = np.abs(reduced.astype(int) - exact.astype(int))
    assert 0 < difference.mean() < 3  # the stated tolerance: a few grey levels on average


def test_fast_reduced_decode_follows_exif_rotation(large_jpeg):
    rotated = with_exif_orientation(large_jpeg, 6)
    exact = decode_image(ImageTransform(resize=200, encoding=".png").apply(rotated), -1)
    reduced = decode_image(ImageTransform(resize=200, encoding=".png", fast=True).apply(rotated), -1)
    height, width = jpeg_size(large_jpeg)
    turned = cv2_size(width, height, 200)  # orientation 6 turns the frame by 90 degrees
    assert reduced.shape == exact.shape == (turned[1], turned[0], 3)


def test_fast_leaves_pngs_exact(large_jpeg):
    png = encode_image(decode_image(large_jpeg), ".png", 1)
    assert ImageTransform(resize=256, fast=True).apply(png) == ImageTransform(resize=256).apply(png)


# -- which decoder: simplejpeg where it gives OpenCV's pixels, OpenCV everywhere else ----------

def im2rec_bytes(data: bytes, color: int = 1, resize: int = 0) -> bytes:
    """What im2rec stores for ``data``: cv2.imread's decode, its shorter-side resize, cv2.imencode at quality 95."""
    img = cv2.imdecode(np.frombuffer(data, np.uint8), color)
    if resize:
        height, width = img.shape[:2]
        size = (resize, height * resize // width) if height > width else (width * resize // height, resize)
        img = cv2.resize(img, size)
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


def with_app1(jpeg_bytes: bytes, body: bytes) -> bytes:
    return jpeg_bytes[:2] + b"\xff\xe1" + struct.pack(">H", 2 + len(body)) + body + jpeg_bytes[2:]


def jpeg_kinds(jpeg: bytes) -> dict[str, tuple[bytes, bool]]:
    """Differently made JPEGs of one photo -> (bytes, whether simplejpeg decodes them in place of OpenCV)."""
    img = decode_image(jpeg, 1)
    odd = np.ascontiguousarray(img[:101, :77])

    def encoded(pixels: np.ndarray, *params: int) -> bytes:
        return cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, 90, *params])[1].tobytes()

    import simplejpeg

    cmyk = simplejpeg.encode_jpeg(np.dstack([img, img[:, :, :1]]), 90, "CMYK")
    corrupt = bytearray(jpeg)
    corrupt[len(jpeg) // 2:len(jpeg) // 2 + 8] = b"\x00\x00\xff\x55\x13\x00\xff\xd3"  # a bad marker mid-scan
    return {
        "baseline 4:2:0": (jpeg, True),
        "progressive": (encoded(img, cv2.IMWRITE_JPEG_PROGRESSIVE, 1), True),
        "4:4:4": (encoded(img, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444), True),
        "4:2:2": (encoded(img, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422), True),
        "restart markers, optimized tables": (encoded(img, cv2.IMWRITE_JPEG_RST_INTERVAL, 3,
                                                      cv2.IMWRITE_JPEG_OPTIMIZE, 1), True),
        "odd size": (encoded(odd), True),
        "grey": (encoded(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)), True),
        "EXIF orientation 1": (with_exif_orientation(jpeg, 1), True),
        "EXIF without orientation": (with_app1(jpeg, b"Exif\0\0II*\0" + struct.pack("<IH", 8, 0) + b"\0" * 4),
                                     True),
        "EXIF orientation 3": (with_exif_orientation(jpeg, 3), False),
        "EXIF orientation 8": (with_exif_orientation(jpeg, 8), False),
        "XMP before EXIF": (with_app1(with_exif_orientation(jpeg, 6), b"http://ns.adobe.com/xap/1.0/\0<x/>"),
                            False),
        "CMYK": (cmyk, False),
        "corrupt scan (libjpeg warns)": (bytes(corrupt), False),
    }


JPEG_KINDS = ["baseline 4:2:0", "progressive", "4:4:4", "4:2:2", "restart markers, optimized tables", "odd size",
              "grey", "EXIF orientation 1", "EXIF without orientation", "EXIF orientation 3", "EXIF orientation 8",
              "XMP before EXIF", "CMYK", "corrupt scan (libjpeg warns)"]


@pytest.mark.parametrize("kind", JPEG_KINDS)
def test_every_kind_of_jpeg_gives_im2rec_bytes(jpeg, kind):
    data, _ = jpeg_kinds(jpeg)[kind]
    for color in (1, 0, -1):
        assert ImageTransform(color=color).apply(data) == im2rec_bytes(data, color)
        assert ImageTransform(color=color, resize=100).apply(data) == im2rec_bytes(data, color, 100)


@pytest.mark.parametrize("kind", JPEG_KINDS)
def test_simplejpeg_decodes_only_what_it_decodes_as_opencv(jpeg, kind, monkeypatch):
    import mxrec.packing.prepare

    data, by_simplejpeg = jpeg_kinds(jpeg)[kind]

    def no_opencv_decode(*args, **kwargs):
        raise AssertionError("decoded by OpenCV")

    monkeypatch.setattr(mxrec.packing.prepare, "decode_image", no_opencv_decode)
    for color in (1, 0):
        if by_simplejpeg:
            ImageTransform(color=color).apply(data)
        else:
            with pytest.raises(AssertionError, match="decoded by OpenCV"):
                ImageTransform(color=color).apply(data)
    with pytest.raises(AssertionError, match="decoded by OpenCV"):  # colour -1: OpenCV's own channel rules
        ImageTransform(color=-1).apply(data)


def test_without_simplejpeg_opencv_decodes_everything(jpeg, without_simplejpeg):
    for options in (dict(), dict(resize=100, color=0), dict(resize=200, fast=True)):  # 200: no reduced decode
        assert ImageTransform(**options).apply(jpeg) == im2rec_bytes(jpeg, options.get("color", 1),
                                                                     options.get("resize", 0))


def test_fast_decode_stays_within_the_stated_tolerance(golden):
    # Photos with a shorter side of 279-497 px: at 256 no reduced decode, only the fast IDCT and upsampling.
    photos = sorted((golden / "im2rec" / "photos200").rglob("*.jpg"))[::5]
    means, peaks = [], []
    for path in photos:
        data = path.read_bytes()
        exact = decode_image(ImageTransform(resize=256).apply(data), 1).astype(int)
        fast = decode_image(ImageTransform(resize=256, fast=True).apply(data), 1).astype(int)
        assert fast.shape == exact.shape
        difference = np.abs(fast - exact)
        means.append(difference.mean())
        peaks.append(difference.max())
    # the module doc's figures: about 1.3 grey levels per pixel on average, under 2.5 for any one image
    assert 0.5 < np.mean(means) < 2 and max(means) < 2.5 and max(peaks) < 64


def test_fast_decodes_grey_as_grey(jpeg):
    # 364 px shorter side: not twice 200, so a full-size decode with the fast IDCT
    exact = decode_image(ImageTransform(color=0, resize=200).apply(jpeg), -1)
    fast = decode_image(ImageTransform(color=0, resize=200, fast=True).apply(jpeg), -1)
    assert fast.ndim == 2 and fast.shape == exact.shape
    assert 0 < np.abs(fast.astype(int) - exact.astype(int)).mean() < 2
