#pragma once
// Schemas shared by families of one kind: the torchvision image classifiers and detectors.
#include <cstdint>
#include <string>
#include <vector>

#include "spec/family.h"

namespace tb {

// `min_image`: the smallest side the network's downsampling leaves at least one pixel for.
FamilySchema image_classifier_schema(const std::string& name, const std::string& summary,
                                     int64_t default_image, int64_t min_image,
                                     const std::string& optimizer);

// A detection family's schema: its own parameters, then the image-size and box parameters
// they share, then the common ones with torchvision's detection recipe (SGD, momentum 0.9,
// 2 images per GPU).
FamilySchema detection_schema(const std::string& name, const std::string& summary,
                              std::vector<ParamSpec> own, const std::string& example);

}  // namespace tb
