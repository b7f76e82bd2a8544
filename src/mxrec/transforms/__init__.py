"""Image transforms, public: ``mx.image``'s augmenters and ``CreateAugmenter``, Gluon's transforms, collate.

* :mod:`~mxrec.transforms.functional`: the kernels (resize, crops, flips, the affine warp, colour
  operations) that everything here and MXNet's default augmenter (:mod:`mxrec.train.augment`) is built from.
* :mod:`~mxrec.transforms.augmenters`: ``mx.image``'s augmenter classes and :func:`create_augmenter`.
* :mod:`~mxrec.transforms.steps`: the augmentation step protocol (:class:`Step`: what a step draws from the
  sample's random stream, apart from what it does with it) and :class:`StepList`: your own steps for
  ``ImageRecordIter(aug_list=...)``, ``ImageIter`` and ``ImageRecordDataset(preprocess=...)``.
* :mod:`~mxrec.transforms.gluon`: Gluon's ``RandomResizedCrop``, ``ToTensor``, ``Normalize``, ... .
* :mod:`~mxrec.transforms.collate`: :func:`pad_collate`, batches of images of different sizes.
* :mod:`~mxrec.transforms.rng`: per-sample random streams, so results never depend on threads.

Every transform is ``t(img, rng=None)``; images are numpy arrays, HWC. May
import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.image` (and numpy, OpenCV).
"""

from mxrec.transforms.augmenters import (
    CREATE_AUGMENTER_OPTIONS,
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
    BrightnessJitterAug,
    CastAug,
    CenterCropAug,
    ColorJitterAug,
    ColorNormalizeAug,
    ContrastJitterAug,
    ForceResizeAug,
    HorizontalFlipAug,
    HueJitterAug,
    LightingAug,
    RandomCropAug,
    RandomGrayAug,
    RandomOrderAug,
    RandomSizedCropAug,
    ResizeAug,
    SaturationJitterAug,
    SequentialAug,
    Transform,
    create_augmenter,
)
from mxrec.transforms.collate import pad_collate, pad_to_max
from mxrec.transforms.functional import center_crop, fixed_crop, random_crop, random_size_crop, scale_down
from mxrec.transforms.gluon import (
    CenterCrop,
    Compose,
    Normalize,
    RandomFlipLeftRight,
    RandomResizedCrop,
    Resize,
    ToTensor,
)
from mxrec.transforms.steps import Step, StepList

__all__ = [
    "CREATE_AUGMENTER_OPTIONS",
    "IMAGENET_MEAN_RGB",
    "IMAGENET_STD_RGB",
    "BrightnessJitterAug",
    "CastAug",
    "CenterCrop",
    "CenterCropAug",
    "ColorJitterAug",
    "ColorNormalizeAug",
    "Compose",
    "ContrastJitterAug",
    "ForceResizeAug",
    "HorizontalFlipAug",
    "HueJitterAug",
    "LightingAug",
    "Normalize",
    "RandomCropAug",
    "RandomFlipLeftRight",
    "RandomGrayAug",
    "RandomOrderAug",
    "RandomResizedCrop",
    "RandomSizedCropAug",
    "Resize",
    "ResizeAug",
    "SaturationJitterAug",
    "SequentialAug",
    "Step",
    "StepList",
    "ToTensor",
    "Transform",
    "center_crop",
    "create_augmenter",
    "fixed_crop",
    "pad_collate",
    "pad_to_max",
    "random_crop",
    "random_size_crop",
    "scale_down",
]
