# Parameter names, shapes and trainability of torchvision 0.14's detection models, built
# without weights, for tests/detection_models_test.cc; prints one JSON object.
import json
import torchvision
from torchvision.models import resnet50
from torchvision.models.detection import FasterRCNN, RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor, resnet_fpn_backbone
from torchvision.ops import misc
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def describe(m):
    return {n: [list(p.shape), p.requires_grad] for n, p in m.named_parameters()}


out = {}
for name in ["resnet50", "resnet101"]:
    bb = resnet_fpn_backbone(backbone_name=name, weights=None, norm_layer=misc.FrozenBatchNorm2d, trainable_layers=3)
    out["faster_rcnn_" + name] = describe(FasterRCNN(bb, num_classes=91))
# retinanet_resnet50_fpn (v1) without downloading weights.
bb = resnet50(weights=None, norm_layer=misc.FrozenBatchNorm2d)
bb = _resnet_fpn_extractor(bb, 3, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
out["retinanet"] = describe(RetinaNet(bb, num_classes=91))
print(json.dumps(out))
