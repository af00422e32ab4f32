#include "model/detection_ops.h"

#include <cmath>

namespace tb::det {
using torch::Tensor;
using torch::indexing::None;
using torch::indexing::Slice;

Tensor box_area(const Tensor& b) {
  return (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
}

Tensor box_iou(const Tensor& a, const Tensor& b) {
  auto area_a = box_area(a), area_b = box_area(b);
  auto lt = torch::max(a.index({Slice(), torch::indexing::None, Slice(0, 2)}),
                       b.index({Slice(), Slice(0, 2)}));
  auto rb = torch::min(a.index({Slice(), torch::indexing::None, Slice(2, 4)}),
                       b.index({Slice(), Slice(2, 4)}));
  auto wh = (rb - lt).clamp_min(0);
  auto inter = wh.select(2, 0) * wh.select(2, 1);
  return inter / (area_a.unsqueeze(1) + area_b.unsqueeze(0) - inter);
}

Tensor clip_boxes_to_image(const Tensor& boxes, int64_t height, int64_t width) {
  auto x = boxes.index({Slice(), Slice(0, 4, 2)}).clamp(0, double(width));
  auto y = boxes.index({Slice(), Slice(1, 4, 2)}).clamp(0, double(height));
  return torch::stack({x.select(1, 0), y.select(1, 0), x.select(1, 1), y.select(1, 1)}, 1);
}

Tensor remove_small_boxes(const Tensor& boxes, double min_size) {
  auto w = boxes.select(1, 2) - boxes.select(1, 0), h = boxes.select(1, 3) - boxes.select(1, 1);
  return torch::where((w >= min_size).logical_and(h >= min_size))[0];
}

namespace {
// Greedy suppression over boxes sorted by score; a box only suppresses boxes of its own
// category when `cats` is given.
Tensor suppress(const Tensor& boxes_in, const Tensor& scores, const int64_t* cats,
                double threshold) {
  auto boxes = boxes_in.to(torch::kFloat).contiguous();
  const int64_t n = boxes.size(0);
  if (n == 0) return torch::empty({0}, torch::kLong);
  auto order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true)).contiguous();
  auto areas = box_area(boxes).contiguous();
  const float* b = boxes.data_ptr<float>();
  const float* area = areas.data_ptr<float>();
  const int64_t* ord = order.data_ptr<int64_t>();
  std::vector<char> removed(n, 0);
  std::vector<int64_t> keep;
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = ord[oi];
    if (removed[i]) continue;
    keep.push_back(i);
    const float* bi = b + 4 * i;
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = ord[oj];
      if (removed[j] || (cats && cats[i] != cats[j])) continue;
      const float* bj = b + 4 * j;
      const float w = std::max(0.f, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
      const float h = std::max(0.f, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
      const float inter = w * h;
      if (inter / (area[i] + area[j] - inter) > threshold) removed[j] = 1;
    }
  }
  return torch::tensor(keep, torch::kLong);
}
}  // namespace

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  return suppress(boxes, scores, nullptr, iou_threshold);
}

Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs,
                   double iou_threshold) {
  auto cats = idxs.to(torch::kLong).contiguous();
  return suppress(boxes, scores, cats.data_ptr<int64_t>(), iou_threshold);
}

Tensor BoxCoder::encode(const Tensor& boxes, const Tensor& anchors) const {
  auto aw = anchors.select(1, 2) - anchors.select(1, 0);
  auto ah = anchors.select(1, 3) - anchors.select(1, 1);
  auto ax = anchors.select(1, 0) + 0.5 * aw, ay = anchors.select(1, 1) + 0.5 * ah;
  auto gw = boxes.select(1, 2) - boxes.select(1, 0);
  auto gh = boxes.select(1, 3) - boxes.select(1, 1);
  auto gx = boxes.select(1, 0) + 0.5 * gw, gy = boxes.select(1, 1) + 0.5 * gh;
  return torch::stack({weights[0] * (gx - ax) / aw, weights[1] * (gy - ay) / ah,
                       weights[2] * torch::log(gw / aw), weights[3] * torch::log(gh / ah)},
                      1);
}

Tensor BoxCoder::decode(const Tensor& deltas, const Tensor& anchors) const {
  auto a = anchors.to(deltas.dtype());
  auto w = (a.select(1, 2) - a.select(1, 0)).unsqueeze(1);
  auto h = (a.select(1, 3) - a.select(1, 1)).unsqueeze(1);
  auto cx = a.select(1, 0).unsqueeze(1) + 0.5 * w, cy = a.select(1, 1).unsqueeze(1) + 0.5 * h;
  auto dx = deltas.index({Slice(), Slice(0, None, 4)}) / weights[0];
  auto dy = deltas.index({Slice(), Slice(1, None, 4)}) / weights[1];
  auto dw = (deltas.index({Slice(), Slice(2, None, 4)}) / weights[2]).clamp_max(clip);
  auto dh = (deltas.index({Slice(), Slice(3, None, 4)}) / weights[3]).clamp_max(clip);
  auto px = dx * w + cx, py = dy * h + cy;
  auto hw = 0.5 * torch::exp(dw) * w, hh = 0.5 * torch::exp(dh) * h;
  // Interleave back to (x1, y1, x2, y2) per box.
  return torch::stack({px - hw, py - hh, px + hw, py + hh}, 2).flatten(1);
}

int64_t AnchorGenerator::anchors_per_location(size_t level) const {
  return int64_t(sizes.at(level).size() * ratios.at(level).size());
}

Tensor AnchorGenerator::cell_anchors(size_t level) const {
  auto scales = torch::tensor(sizes.at(level), torch::kFloat);
  auto ar = torch::tensor(ratios.at(level), torch::kFloat);
  auto h_ratios = torch::sqrt(ar);
  auto w_ratios = 1 / h_ratios;
  auto ws = (w_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape(-1);
  auto hs = (h_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape(-1);
  return (torch::stack({-ws, -hs, ws, hs}, 1) / 2).round();
}

Tensor AnchorGenerator::grid_anchors(
    int64_t image_h, int64_t image_w,
    const std::vector<std::array<int64_t, 2>>& feature_sizes) const {
  std::vector<Tensor> all;
  for (size_t l = 0; l < feature_sizes.size(); ++l) {
    const int64_t gh = feature_sizes[l][0], gw = feature_sizes[l][1];
    const int64_t sh = image_h / gh, sw = image_w / gw;
    auto sx = torch::arange(gw, torch::kFloat) * double(sw);
    auto sy = torch::arange(gh, torch::kFloat) * double(sh);
    auto grid = torch::meshgrid({sy, sx}, "ij");
    auto yy = grid[0].reshape(-1), xx = grid[1].reshape(-1);
    auto shifts = torch::stack({xx, yy, xx, yy}, 1);
    all.push_back((shifts.view({-1, 1, 4}) + cell_anchors(l).view({1, -1, 4})).reshape({-1, 4}));
  }
  return torch::cat(all);
}

namespace {
// Sample coordinates along one axis for every roi: [K, out * grid], with the weights and
// the two neighbouring indices of torchvision's bilinear_interpolate (samples beyond one
// pixel outside the map contribute nothing; those within it clamp to the border).
struct Axis {
  Tensor low, high, w_low, w_high;
};
Axis sample_axis(const Tensor& start, const Tensor& bin, int64_t out, int64_t grid, int64_t size) {
  const int64_t K = start.size(0);
  auto p = torch::arange(out, torch::kFloat).view({1, out, 1});
  auto i = torch::arange(grid, torch::kFloat).view({1, 1, grid});
  auto b = bin.view({K, 1, 1});
  // start + p * bin + (i + 0.5) * bin / grid, in torchvision's order of operations.
  auto coord =
      (start.view({K, 1, 1}) + p * b + (i + 0.5) * b / double(grid)).reshape({K, out * grid});
  auto outside = (coord < -1.0).logical_or(coord > double(size));
  auto c = coord.clamp_min(0);
  auto low = c.floor().to(torch::kLong);
  auto at_edge = low >= size - 1;
  low = torch::where(at_edge, torch::full_like(low, size - 1), low);
  auto high = torch::where(at_edge, low, low + 1);
  c = torch::where(at_edge, low.to(torch::kFloat), c);
  auto l = c - low.to(torch::kFloat);
  auto valid = outside.logical_not().to(torch::kFloat);
  return {low, high, (1 - l) * valid, l * valid};
}
}  // namespace

Tensor roi_align(const Tensor& input, const Tensor& rois, int64_t out_h, int64_t out_w,
                 double spatial_scale, int64_t sampling_ratio) {
  TORCH_CHECK(sampling_ratio > 0, "roi_align: only a fixed sampling_ratio is supported");
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t K = rois.size(0);
  if (K == 0) return torch::zeros({0, C, out_h, out_w}, input.options());
  auto r = rois.to(torch::kFloat);
  auto batch = r.select(1, 0).to(torch::kLong);
  auto x1 = r.select(1, 1) * spatial_scale, y1 = r.select(1, 2) * spatial_scale;
  auto x2 = r.select(1, 3) * spatial_scale, y2 = r.select(1, 4) * spatial_scale;
  // aligned=false: a roi is at least one pixel wide and high.
  auto rw = (x2 - x1).clamp_min(1.0), rh = (y2 - y1).clamp_min(1.0);
  const int64_t g = sampling_ratio;
  Axis ya = sample_axis(y1, rh / double(out_h), out_h, g, H);
  Axis xa = sample_axis(x1, rw / double(out_w), out_w, g, W);
  // Rows of the [N*H*W, C] feature table for each corner: [K, Sy, Sx].
  auto table = input.permute({0, 2, 3, 1}).reshape({N * H * W, C});
  auto base = (batch * H * W).view({K, 1, 1});
  auto gather = [&](const Tensor& yi, const Tensor& xi) {
    auto idx = base + yi.unsqueeze(2) * W + xi.unsqueeze(1);
    return table.index_select(0, idx.reshape(-1)).view({K, yi.size(1), xi.size(1), C});
  };
  auto weight = [&](const Tensor& wy, const Tensor& wx) {
    return (wy.unsqueeze(2) * wx.unsqueeze(1)).unsqueeze(3).to(input.dtype());
  };
  auto v = gather(ya.low, xa.low) * weight(ya.w_low, xa.w_low);
  v = v + gather(ya.low, xa.high) * weight(ya.w_low, xa.w_high);
  v = v + gather(ya.high, xa.low) * weight(ya.w_high, xa.w_low);
  v = v + gather(ya.high, xa.high) * weight(ya.w_high, xa.w_high);
  // Average the grid x grid samples of each bin.
  v = v.view({K, out_h, g, out_w, g, C}).sum({2, 4}) / double(g * g);
  return v.permute({0, 3, 1, 2}).contiguous();
}

Tensor map_levels(const Tensor& boxes, int64_t k_min, int64_t k_max) {
  auto s = torch::sqrt(box_area(boxes));
  auto lvl = torch::floor(4 + torch::log2(s / 224.0) + 1e-6);
  return lvl.clamp(double(k_min), double(k_max)).to(torch::kLong) - k_min;
}

Tensor multiscale_roi_align(const std::vector<Tensor>& features, const std::vector<Tensor>& boxes,
                            int64_t image_h, int64_t image_w, int64_t output,
                            int64_t sampling_ratio) {
  std::vector<Tensor> rois;
  for (size_t i = 0; i < boxes.size(); ++i) {
    auto b = boxes[i].to(torch::kFloat);
    rois.push_back(torch::cat({torch::full({b.size(0), 1}, double(i), b.options()), b}, 1));
  }
  auto all = torch::cat(rois);
  std::vector<double> scales;
  for (const auto& f : features) {
    // Only the first dimension decides, as torchvision's _infer_scale.
    const double approx = double(f.size(2)) / double(image_h);
    scales.push_back(std::pow(2.0, std::round(std::log2(approx))));
  }
  (void)image_w;
  const int64_t k_min = int64_t(-std::log2(scales.front())),
                k_max = int64_t(-std::log2(scales.back()));
  if (features.size() == 1)
    return roi_align(features[0], all, output, output, scales[0], sampling_ratio);
  auto levels = map_levels(all.index({Slice(), Slice(1, 5)}), k_min, k_max);
  std::vector<Tensor> outs, order;
  for (size_t l = 0; l < features.size(); ++l) {
    auto idx = torch::where(levels == int64_t(l))[0];
    if (idx.numel() == 0) continue;
    outs.push_back(roi_align(features[l], all.index_select(0, idx), output, output, scales[l],
                             sampling_ratio));
    order.push_back(idx);
  }
  // Back to the rois' order.
  auto inverse = std::get<1>(torch::cat(order).sort());
  return torch::cat(outs).index_select(0, inverse);
}

Tensor match(const Tensor& iou, double high, double low, bool allow_low_quality) {
  auto [vals, matches] = iou.max(0);
  auto all = matches.clone();
  matches.masked_fill_(vals < low, kBelowLow);
  matches.masked_fill_((vals >= low).logical_and(vals < high), kBetween);
  if (allow_low_quality) {
    auto best = std::get<0>(iou.max(1));
    auto pairs = torch::where(iou == best.unsqueeze(1));
    auto pred = pairs[1];
    matches.index_put_({pred}, all.index_select(0, pred));
  }
  return matches;
}

std::pair<Tensor, Tensor> sample_balanced(const Tensor& labels, int64_t per_image,
                                          double fraction) {
  auto pos = torch::where(labels >= 1)[0];
  auto neg = torch::where(labels == 0)[0];
  const int64_t n_pos = std::min<int64_t>(pos.numel(), int64_t(per_image * fraction));
  const int64_t n_neg = std::min<int64_t>(neg.numel(), per_image - n_pos);
  auto p = pos.index_select(0, torch::randperm(pos.numel(), torch::kLong).slice(0, 0, n_pos));
  auto n = neg.index_select(0, torch::randperm(neg.numel(), torch::kLong).slice(0, 0, n_neg));
  return {p, n};
}

}  // namespace tb::det
