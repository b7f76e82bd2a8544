"""torchvision.transforms' semantics for the five classes ``MXFaceDataset`` uses (uint8 HWC RGB input)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image


class Compose:
    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img


class ToPILImage:
    def __call__(self, pic: np.ndarray) -> Image.Image:
        if not isinstance(pic, np.ndarray) or pic.dtype != np.uint8 or pic.ndim != 3:
            raise TypeError(f"stand-in ToPILImage takes uint8 HWC arrays, not {type(pic)}")
        return Image.fromarray(pic, "RGB")


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Image.Image) -> Image.Image:
        if torch.rand(1) < self.p:
            return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return img


class ToTensor:
    def __call__(self, pic: Image.Image) -> torch.Tensor:
        array = np.array(pic, np.uint8, copy=True)
        return torch.from_numpy(array).permute(2, 0, 1).contiguous().to(torch.float32).div(255)


class Normalize:
    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean, self.std = mean, std

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return (tensor - mean) / std
