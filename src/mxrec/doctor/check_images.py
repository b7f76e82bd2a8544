"""Image checks of an image dataset: every image sound, and image sizes and channels consistent.

:func:`check_images` reports each record whose image bytes are empty, declare
a zero-size image, are truncated or corrupt (:mod:`mxrec.image.inspect`). Without
decoding only the file headers are read, which finds empty and zero-size
images and damaged headers; damage inside the compressed data needs a decode.

:func:`check_shapes` histograms ``(height, width, channels)`` over the sound
images and reports outliers: a channel count other than the most common one,
or a side more than ``factor`` times off the median (shorter side below
median / factor, or longer side above median x factor). Mixed sizes as such
are normal for photographs and are not reported.
"""

from __future__ import annotations

from collections import Counter
from statistics import median

from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem

SHAPES_LISTED = 20  # most common shapes kept in the check's details


def image_records(contents: list[RecordContent]) -> list[RecordContent]:
    """Records that carry an image: a header followed by image bytes (not an InsightFace header or identity record)."""
    return [c for c in contents if c.image is not None and not c.layout_record]


def check_images(contents: list[RecordContent], decoded: bool) -> Check:
    """The ``images`` check; ``decoded`` says whether the contents were scanned with decoding."""
    records = image_records(contents)
    problems = [Problem(c.name, f"{c.image.fault}: {c.image.reason}", c.at) for c in records if c.image.fault]
    faults = Counter(c.image.fault for c in records if c.image.fault)
    formats = Counter(c.image.format for c in records)
    details = {"images": len(records), "decoded": decoded, "formats": dict(formats), "faults": dict(faults)}
    how = "decoded" if decoded else "file headers only (--decode decodes every image)"
    found = ", ".join(f"{n} {kind}" for kind, n in sorted(faults.items())) if problems else "all sound"
    summary = f"{len(records)} image(s), {how}: {found}"
    return Check("images", not problems, summary, problems, details=details)


def _shape_text(shape: tuple[int, int, int]) -> str:
    return f"{shape[1]}x{shape[0]}x{shape[2]}"


def check_shapes(contents: list[RecordContent], factor: float = 4.0) -> Check:
    """The ``shapes`` check: histogram of image shapes; channel and size outliers."""
    records = image_records(contents)
    sized = [c for c in records if c.image.shape is not None and not c.image.fault]
    if not sized:
        return Check("shapes", True, "no image sizes known", details={"unknown": len(records)})
    shapes = Counter(c.image.shape for c in sized)
    channels = Counter(c.image.shape[2] for c in sized)
    common_channels = channels.most_common(1)[0][0]
    short_median = median(min(c.image.shape[:2]) for c in sized)
    long_median = median(max(c.image.shape[:2]) for c in sized)
    problems = []
    for c in sized:
        height, width, depth = c.image.shape
        if depth != common_channels:
            problems.append(Problem(c.name, f"{depth} channel(s); most images have {common_channels}", c.at))
        if min(height, width) * factor < short_median:
            problems.append(Problem(c.name, f"{width}x{height}: shorter side under 1/{factor:g} of the "
                                    f"median shorter side ({short_median:g} px)", c.at))
        elif max(height, width) > long_median * factor:
            problems.append(Problem(c.name, f"{width}x{height}: longer side over {factor:g}x the "
                                    f"median longer side ({long_median:g} px)", c.at))
    details = {"sized": len(sized), "unknown": len(records) - len(sized), "distinct_shapes": len(shapes),
               "shapes": {_shape_text(s): n for s, n in shapes.most_common(SHAPES_LISTED)},
               "channels": {str(k): n for k, n in sorted(channels.items())},
               "median_shorter_side": short_median, "median_longer_side": long_median}
    top = ", ".join(f"{_shape_text(s)} ({n})" for s, n in shapes.most_common(3))
    summary = (f"{len(shapes)} distinct shape(s) (WxHxC) over {len(sized)} image(s): {top}"
               + (f"; {len(problems)} outlier(s)" if problems else ""))
    return Check("shapes", not problems, summary, problems, details=details)
