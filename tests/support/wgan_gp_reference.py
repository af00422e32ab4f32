# Parameter counts of WGAN-GP's 64x64 residual generator and critic (gan_64x64.py's
# GoodGenerator / GoodDiscriminator), defined independently in python3-torch.
# Usage: /usr/bin/python3 wgan_gp_reference.py DIM  -> "generator critic"
import sys
import torch.nn as nn


def up_block(i, o):
    return nn.ModuleList([nn.BatchNorm2d(i), nn.Conv2d(i, o, 3, padding=1, bias=False),
                          nn.BatchNorm2d(o), nn.Conv2d(o, o, 3, padding=1), nn.Conv2d(i, o, 1)])


def down_block(i, o):
    return nn.ModuleList([nn.GroupNorm(1, i), nn.Conv2d(i, i, 3, padding=1, bias=False),
                          nn.GroupNorm(1, i), nn.Conv2d(i, o, 3, padding=1), nn.Conv2d(i, o, 1)])


def count(m):
    return sum(p.numel() for p in m.parameters())


d = int(sys.argv[1])
g = nn.ModuleList([nn.Linear(128, 4 * 4 * 8 * d), up_block(8 * d, 8 * d), up_block(8 * d, 4 * d),
                   up_block(4 * d, 2 * d), up_block(2 * d, d), nn.BatchNorm2d(d),
                   nn.Conv2d(d, 3, 3, padding=1)])
c = nn.ModuleList([nn.Conv2d(3, d, 3, padding=1), down_block(d, 2 * d), down_block(2 * d, 4 * d),
                   down_block(4 * d, 8 * d), down_block(8 * d, 8 * d), nn.Linear(4 * 4 * 8 * d, 1)])
print(count(g), count(c))
