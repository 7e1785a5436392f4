"""Built-in model zoo: ResNet-50, a RetinaNet-like detector and small CNNs, written in plain torch.

Why our own: the harness must serve real models offline, and torchvision is not a dependency.
Weights are random (latency does not depend on their values); shapes follow the original papers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from hetsched.core.registry import Registry

MODELS: Registry = Registry("model")


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (stride here), 1x1 expand, residual add."""

    expansion = 4

    def __init__(self, in_ch: int, mid_ch: int, stride: int) -> None:
        super().__init__()
        out_ch = mid_ch * self.expansion
        self.conv1 = nn.Conv2d(in_ch, mid_ch, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_ch)
        self.conv2 = nn.Conv2d(mid_ch, mid_ch, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_ch)
        self.conv3 = nn.Conv2d(mid_ch, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU()
        self.down = None
        if stride != 1 or in_ch != out_ch:
            self.down = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.down is None else self.down(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + skip)


class ResNetBackbone(nn.Module):
    """ResNet stem and four stages; returns the C3, C4, C5 maps (the detector needs them)."""

    def __init__(self, blocks: tuple[int, int, int, int], width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, in_ch = [], width
        for i, n in enumerate(blocks):
            mid = width * 2**i
            layers = []
            for b in range(n):
                layers.append(Bottleneck(in_ch, mid, 2 if (b == 0 and i > 0) else 1))
                in_ch = mid * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.stages = nn.ModuleList(stages)
        self.out_channels = [width * 2**i * Bottleneck.expansion for i in range(4)]

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats[1:]


class ResNetClassifier(nn.Module):
    """ResNet classifier: backbone, global average pool, dense layer to the classes."""

    def __init__(self, blocks: tuple[int, int, int, int], width: int, classes: int) -> None:
        super().__init__()
        self.backbone = ResNetBackbone(blocks, width)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(self.backbone.out_channels[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.backbone(x)[-1]), 1))


class RetinaNetLike(nn.Module):
    """One-stage detector after RetinaNet: ResNet backbone, FPN P3-P7, shared class/box heads."""

    def __init__(self, blocks=(3, 4, 6, 3), width=64, fpn_ch=256, classes=264, anchors=9) -> None:
        super().__init__()
        self.backbone = ResNetBackbone(blocks, width)
        c3, c4, c5 = self.backbone.out_channels[1:]
        self.lateral = nn.ModuleList(nn.Conv2d(c, fpn_ch, 1) for c in (c3, c4, c5))
        self.smooth = nn.ModuleList(nn.Conv2d(fpn_ch, fpn_ch, 3, padding=1) for _ in range(3))
        self.p6 = nn.Conv2d(c5, fpn_ch, 3, stride=2, padding=1)
        self.p7 = nn.Sequential(nn.ReLU(), nn.Conv2d(fpn_ch, fpn_ch, 3, stride=2, padding=1))
        self.cls_head = self._head(fpn_ch, anchors * classes)
        self.box_head = self._head(fpn_ch, anchors * 4)

    @staticmethod
    def _head(ch: int, out: int) -> nn.Sequential:
        layers: list[nn.Module] = []
        for _ in range(4):
            layers += [nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU()]
        return nn.Sequential(*layers, nn.Conv2d(ch, out, 3, padding=1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c3, c4, c5 = self.backbone(x)
        p5 = self.lateral[2](c5)
        p4 = self.lateral[1](c4) + nn.functional.interpolate(p5, size=c4.shape[-2:])
        p3 = self.lateral[0](c3) + nn.functional.interpolate(p4, size=c3.shape[-2:])
        p6 = self.p6(c5)
        levels = [self.smooth[0](p3), self.smooth[1](p4), self.smooth[2](p5), p6, self.p7(p6)]
        cls = torch.cat([torch.flatten(self.cls_head(p), 1) for p in levels], 1)
        box = torch.cat([torch.flatten(self.box_head(p), 1) for p in levels], 1)
        return cls, box


class SmallCNN(nn.Module):
    """A plain conv-relu-pool stack with a dense head; `width` scales its cost for the dataset."""

    def __init__(self, width: int = 16, depth: int = 3, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for i in range(depth):
            out_ch = width * 2**i
            layers += [nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


ZooEntry = tuple[Callable[[], nn.Module], tuple[int, ...]]


def _entry(build: Callable[[], nn.Module], shape: tuple[int, ...]) -> Callable[[], ZooEntry]:
    return lambda: (build, shape)


MODELS.register("resnet50")(
    _entry(lambda: ResNetClassifier((3, 4, 6, 3), 64, 1000), (1, 3, 224, 224))
)
MODELS.register("retinanet")(_entry(RetinaNetLike, (1, 3, 224, 224)))
MODELS.register("resnet18ish")(
    _entry(lambda: ResNetClassifier((1, 1, 1, 1), 32, 1000), (1, 3, 160, 160))
)
MODELS.register("cnn-s")(_entry(lambda: SmallCNN(16, 3), (1, 3, 64, 64)))
MODELS.register("cnn-m")(_entry(lambda: SmallCNN(32, 3), (1, 3, 96, 96)))
MODELS.register("cnn-l")(_entry(lambda: SmallCNN(48, 4), (1, 3, 128, 128)))


def build_model(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    """Builds a zoo model in eval mode (seeded weights) and returns it with its input shape."""
    build, shape = MODELS.create(name)
    torch.manual_seed(0)
    return build().eval(), shape
