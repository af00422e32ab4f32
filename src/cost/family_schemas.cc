#include "cost/family_schemas.h"

namespace tb {

FamilySchema image_classifier_schema(const std::string& name, const std::string& summary,
                                     int64_t default_image, int64_t min_image,
                                     const std::string& optimizer) {
  const std::string image = std::to_string(default_image);
  FamilySchema s{
      name,
      summary,
      {{"image", "side of the square RGB input image", image, min_image, 1 << 14, {}},
       {"classes", "classes (ImageNet: 1000)", "1000", 1, 1 << 20, {}}},
      name + ":image=" + image + ",classes=1000,batch=32,dtype=fp32,optimizer=" + optimizer,
      "image classification",
      "images",
      {4, 8, 16, 32, 64}};
  for (auto& p : common_params(32, optimizer)) s.params.push_back(p);
  s.contract = name + ":image=" + std::to_string(min_image) + ",classes=5,batch=2";
  return s;
}

FamilySchema detection_schema(const std::string& name, const std::string& summary,
                              std::vector<ParamSpec> own, const std::string& example) {
  FamilySchema s{name,     summary,     std::move(own), example, "object detection",
                 "images", {1, 2, 4, 8}};
  s.params.push_back({"height", "image height in pixels, a multiple of 32", "800", 64, 4096, {}});
  s.params.push_back({"width", "image width in pixels, a multiple of 32", "1088", 64, 4096, {}});
  s.params.push_back(
      {"max_boxes", "most objects per image (each image has 1..max_boxes)", "14", 1, 1000, {}});
  for (auto& p : common_params(2, "momentum")) s.params.push_back(p);
  // Faster R-CNN's RoI heads run on 512 sampled RoIs per image only where an image has that
  // many proposals, as the cost description assumes: 192x192 has.
  s.contract = name + ":height=192,width=192,max_boxes=2,batch=1";
  return s;
}

}  // namespace tb
