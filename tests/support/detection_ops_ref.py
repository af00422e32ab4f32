# Reference outputs of torchvision 0.14 for tests/detection_ops_test.cc: the inputs are
# formulas (sines of aranges) that the test rebuilds in C++; prints one JSON object.
import json, math, torch, torchvision
from torchvision.ops import box_iou, nms, batched_nms, roi_align, MultiScaleRoIAlign
from torchvision.models.detection._utils import BoxCoder, Matcher
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
def wave(n, a): return (torch.arange(n, dtype=torch.float32) * a).sin()
def boxes(n, a, s):
    i = torch.arange(n, dtype=torch.float32)
    x1 = ((i * a).sin() + 1) * (s * 0.4); y1 = ((i * (a * 1.3)).cos() + 1) * (s * 0.4)
    w = ((i * (a * 0.7) + 1).sin() + 1.2) * (s * 0.25); h = ((i * (a * 0.9) + 2).cos() + 1.2) * (s * 0.25)
    return torch.stack([x1, y1, x1 + w, y1 + h], 1)
out = {}
a, b = boxes(5, 0.9, 50), boxes(7, 1.7, 50)
out['iou'] = box_iou(a, b).flatten().tolist()
bx = boxes(300, 0.61, 100); sc = wave(300, 2.3)
out['nms'] = nms(bx, sc, 0.5).tolist()
cat = torch.arange(300) % 3
out['bnms'] = batched_nms(bx, sc, cat, 0.4).tolist()
coder = BoxCoder((10., 10., 5., 5.))
g, an = boxes(6, 0.8, 64), boxes(6, 1.1, 64)
out['enc'] = coder.encode_single(g, an).flatten().tolist()
d = wave(6 * 8, 0.77).reshape(6, 8) * 2
out['dec'] = coder.decode_single(d, an).flatten().tolist()
ag = AnchorGenerator(((32,), (64,), (128,), (256,), (512,)), ((0.5, 1.0, 2.0),) * 5)
sizes = [(24, 32), (12, 16), (6, 8), (3, 4), (2, 2)]
img = torch.zeros(1, 3, 96, 128)
fm = [torch.zeros(1, 1, h, w) for h, w in sizes]
out['anchors'] = ag(ImageList(img, [(96, 128)]), fm)[0].flatten().tolist()
ag2 = AnchorGenerator(tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in [32, 64]), ((0.5, 1.0, 2.0),) * 2)
out['anchors_retina'] = ag2(ImageList(img, [(96, 128)]), fm[:2])[0].flatten().tolist()
x = wave(2 * 3 * 10 * 12, 0.37).reshape(2, 3, 10, 12).requires_grad_()
rb = boxes(8, 0.53, 24) - 4  # some reach outside the map
rois = torch.cat([(torch.arange(8) % 2).float()[:, None], rb], 1)
y = roi_align(x, rois, (3, 4), spatial_scale=0.5, sampling_ratio=2, aligned=False)
out['roi'] = y.flatten().tolist()
(y * wave(y.numel(), 0.11).reshape(y.shape)).sum().backward()
out['roi_grad'] = x.grad.flatten().tolist()
feats = {str(l): wave(2 * 4 * (64 >> l) * (64 >> l), 0.21 + 0.1 * l).reshape(2, 4, 64 >> l, 64 >> l) for l in range(4)}
pooler = MultiScaleRoIAlign(['0', '1', '2', '3'], 5, 2)
mb = [boxes(6, 0.47, 180) * 1.0, boxes(5, 0.83, 120)]
out['msroi'] = pooler(feats, mb, [(256, 256), (256, 256)]).flatten().tolist()
iou = box_iou(boxes(4, 0.9, 60), boxes(40, 0.31, 60))
out['match_lq'] = Matcher(0.7, 0.3, True)(iou).tolist()
out['match'] = Matcher(0.5, 0.4, False)(iou).tolist()
print(json.dumps(out))
