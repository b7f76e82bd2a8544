"""A stand-in for ``torchvision``, on the path only where it is not installed (see testkit.arcface_torch).

Only ``torchvision.transforms``' ``Compose``, ``ToPILImage``, ``RandomHorizontalFlip``, ``ToTensor`` and
``Normalize``, with torchvision's semantics for uint8 HWC numpy input: what ``MXFaceDataset`` uses.
"""
