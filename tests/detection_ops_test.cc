// The detection operators against torchvision 0.14 (tests/support/detection_ops_ref.py under
// /usr/bin/python3 when present) and against small cases worked out by hand, plus a few
// reference numbers carried here so that the comparison holds without Python.
#include "model/detection_ops.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/torchvision_ref.h"

namespace tb {
namespace {
using torch::Tensor;

// The inputs of detection_ops_ref.py, rebuilt with the same operations.
Tensor wave(int64_t n, double a) { return (torch::arange(n, torch::kFloat) * a).sin(); }
Tensor boxes(int64_t n, double a, double s) {
  auto i = torch::arange(n, torch::kFloat);
  auto x1 = ((i * a).sin() + 1) * (s * 0.4), y1 = ((i * (a * 1.3)).cos() + 1) * (s * 0.4);
  auto w = ((i * (a * 0.7) + 1).sin() + 1.2) * (s * 0.25);
  auto h = ((i * (a * 0.9) + 2).cos() + 1.2) * (s * 0.25);
  return torch::stack({x1, y1, x1 + w, y1 + h}, 1);
}

struct Outputs {
  Tensor iou, nms, bnms, enc, dec, anchors, anchors_retina, roi, roi_grad, msroi, match_lq, match;
};

Outputs compute() {
  Outputs o;
  o.iou = det::box_iou(boxes(5, 0.9, 50), boxes(7, 1.7, 50)).flatten();
  auto bx = boxes(300, 0.61, 100);
  auto sc = wave(300, 2.3);
  o.nms = det::nms(bx, sc, 0.5);
  o.bnms = det::batched_nms(bx, sc, torch::arange(300) % 3, 0.4);
  det::BoxCoder coder{{10, 10, 5, 5}};
  auto g = boxes(6, 0.8, 64), an = boxes(6, 1.1, 64);
  o.enc = coder.encode(g, an).flatten();
  o.dec = coder.decode(wave(48, 0.77).reshape({6, 8}) * 2, an).flatten();
  const std::vector<std::array<int64_t, 2>> sizes = {{24, 32}, {12, 16}, {6, 8}, {3, 4}, {2, 2}};
  det::AnchorGenerator ag{{{32}, {64}, {128}, {256}, {512}},
                          std::vector<std::vector<double>>(5, {0.5, 1, 2})};
  o.anchors = ag.grid_anchors(96, 128, sizes).flatten();
  // RetinaNet's sizes: x, int(x 2^(1/3)), int(x 2^(2/3)).
  det::AnchorGenerator ag2{{{32, 40, 50}, {64, 80, 101}},
                           std::vector<std::vector<double>>(2, {0.5, 1, 2})};
  o.anchors_retina = ag2.grid_anchors(96, 128, {sizes[0], sizes[1]}).flatten();
  auto x = wave(2 * 3 * 10 * 12, 0.37).reshape({2, 3, 10, 12}).requires_grad_();
  auto rois = torch::cat(
      {(torch::arange(8) % 2).to(torch::kFloat).unsqueeze(1), boxes(8, 0.53, 24) - 4}, 1);
  auto y = det::roi_align(x, rois, 3, 4, 0.5, 2);
  o.roi = y.detach().flatten();
  (y * wave(y.numel(), 0.11).reshape(y.sizes())).sum().backward();
  o.roi_grad = x.grad().flatten();
  std::vector<Tensor> feats;
  for (int l = 0; l < 4; ++l) {
    const int64_t s = 64 >> l;
    feats.push_back(wave(2 * 4 * s * s, 0.21 + 0.1 * l).reshape({2, 4, s, s}));
  }
  o.msroi =
      det::multiscale_roi_align(feats, {boxes(6, 0.47, 180), boxes(5, 0.83, 120)}, 256, 256, 5, 2)
          .flatten();
  auto iou = det::box_iou(boxes(4, 0.9, 60), boxes(40, 0.31, 60));
  o.match_lq = det::match(iou, 0.7, 0.3, true);
  o.match = det::match(iou, 0.5, 0.4, false);
  return o;
}

void expect_close(const Tensor& got, const nlohmann::json& want, const char* what,
                  double tol = 1e-5) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  auto g = got.to(torch::kDouble).contiguous();
  const double* p = g.data_ptr<double>();
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    const double w = want[i].get<double>();
    if (std::fabs(p[i] - w) > tol * std::max(1.0, std::fabs(w))) {
      ADD_FAILURE() << what << "[" << i << "]: " << p[i] << " vs torchvision " << w;
      ++bad;
    }
  }
}

void expect_equal(const Tensor& got, const nlohmann::json& want, const char* what) {
  auto g = got.to(torch::kLong).contiguous();
  std::vector<int64_t> v(g.data_ptr<int64_t>(), g.data_ptr<int64_t>() + g.numel());
  EXPECT_EQ(v, want.get<std::vector<int64_t>>()) << what;
}

TEST(DetectionOps, MatchTorchvision) {
  auto ref = testing::torchvision_json(TB_SOURCE_DIR "/tests/support/detection_ops_ref.py");
  if (!ref) GTEST_SKIP() << "no /usr/bin/python3 with torchvision; see CarriedReferenceNumbers";
  const Outputs o = compute();
  const auto& r = *ref;
  expect_close(o.iou, r["iou"], "box_iou");
  expect_equal(o.nms, r["nms"], "nms");
  expect_equal(o.bnms, r["bnms"], "batched_nms");
  expect_close(o.enc, r["enc"], "BoxCoder.encode");
  expect_close(o.dec, r["dec"], "BoxCoder.decode");
  expect_close(o.anchors, r["anchors"], "AnchorGenerator");
  expect_close(o.anchors_retina, r["anchors_retina"], "AnchorGenerator (RetinaNet sizes)");
  expect_close(o.roi, r["roi"], "roi_align");
  expect_close(o.roi_grad, r["roi_grad"], "roi_align gradient");
  expect_close(o.msroi, r["msroi"], "MultiScaleRoIAlign");
  expect_equal(o.match_lq, r["match_lq"], "Matcher(0.7, 0.3, low quality)");
  expect_equal(o.match, r["match"], "Matcher(0.5, 0.4)");
}

// Numbers torchvision gave for the same inputs (detection_ops_ref.py), kept for machines
// without Python.
TEST(DetectionOps, CarriedReferenceNumbers) {
  const Outputs o = compute();
  EXPECT_EQ(o.nms.numel(), 84);
  EXPECT_EQ(o.bnms.numel(), 224);
  const std::vector<int64_t> first = {28, 140, 252, 293, 181, 69, 99, 211, 222, 110, 58, 170};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(o.nms[i].item<int64_t>(), first[i]);
  EXPECT_NEAR(o.enc[4].item<double>(), -1.2306249141693115, 1e-5);
  EXPECT_NEAR(o.enc[5].item<double>(), 29.482852935791016, 1e-4);
  EXPECT_NEAR(o.dec[0].item<double>(), 17.572254180908203, 1e-4);
  EXPECT_NEAR(o.dec[3].item<double>(), 67.64454650878906, 1e-4);
  EXPECT_NEAR(o.roi[0].item<double>(), -0.5546401739120483, 1e-5);
  EXPECT_NEAR(o.roi[5].item<double>(), -0.7015720009803772, 1e-5);
  EXPECT_NEAR(o.roi.sum().item<double>(), -39.10367746464908, 1e-4);
  EXPECT_NEAR(o.roi_grad.sum().item<double>(), 3.066226985072717, 1e-4);
  EXPECT_NEAR(o.msroi[0].item<double>(), -0.7692810893058777, 1e-5);
  EXPECT_NEAR(o.msroi.sum().item<double>(), 34.58049192279577, 1e-3);
  const std::vector<int64_t> lq = {0, -2, -1, 1, -1, -1, 2, -1, -2, 3};
  for (size_t i = 0; i < lq.size(); ++i) EXPECT_EQ(o.match_lq[i].item<int64_t>(), lq[i]);
  EXPECT_EQ(o.match_lq[31].item<int64_t>(), 0);
  EXPECT_EQ(o.match[1].item<int64_t>(), -1);  // between 0.3 and 0.4 for the low-quality one
}

TEST(DetectionOps, HandCheckedCases) {
  auto a = torch::tensor({0.f, 0.f, 2.f, 2.f}).view({1, 4});
  auto b = torch::tensor({1.f, 1.f, 3.f, 3.f, 4.f, 4.f, 5.f, 5.f}).view({2, 4});
  auto iou = det::box_iou(a, b);
  EXPECT_NEAR(iou[0][0].item<double>(), 1.0 / 7, 1e-7);  // overlap 1, union 4 + 4 - 1
  EXPECT_EQ(iou[0][1].item<double>(), 0);

  // Box 1 lies inside box 0 at IoU 0.81 / 1 > 0.5 and goes; box 2 is apart and stays.
  auto bx =
      torch::tensor({0.f, 0.f, 1.f, 1.f, 0.1f, 0.1f, 1.f, 1.f, 5.f, 5.f, 6.f, 6.f}).view({3, 4});
  auto keep = det::nms(bx, torch::tensor({0.9f, 0.8f, 0.7f}), 0.5);
  ASSERT_EQ(keep.numel(), 2);
  EXPECT_EQ(keep[0].item<int64_t>(), 0);
  EXPECT_EQ(keep[1].item<int64_t>(), 2);
  // In different categories nothing is suppressed, and the order is by score.
  auto kb = det::batched_nms(bx, torch::tensor({0.8f, 0.9f, 0.7f}), torch::tensor({0, 1, 0}), 0.5);
  ASSERT_EQ(kb.numel(), 3);
  EXPECT_EQ(kb[0].item<int64_t>(), 1);

  // Encoding then decoding gives the boxes back; a box equal to its anchor encodes to 0.
  det::BoxCoder coder{{10, 10, 5, 5}};
  auto anchors = torch::tensor({0.f, 0.f, 10.f, 20.f, 5.f, 5.f, 9.f, 7.f}).view({2, 4});
  auto gt = torch::tensor({0.f, 0.f, 10.f, 20.f, 2.f, 3.f, 12.f, 9.f}).view({2, 4});
  auto d = coder.encode(gt, anchors);
  EXPECT_NEAR(d[0].abs().sum().item<double>(), 0, 1e-6);
  EXPECT_NEAR(d[1][0].item<double>(), 10 * (7.0 - 7.0) / 4, 1e-5);
  EXPECT_NEAR(d[1][2].item<double>(), 5 * std::log(10.0 / 4), 1e-5);
  EXPECT_TRUE(torch::allclose(coder.decode(d, anchors), gt, 1e-5, 1e-4));

  // Ratio 0.5 at size 32: w = 32 / sqrt(0.5) = 45.25, h = 22.63, halved and rounded.
  det::AnchorGenerator ag{{{32}}, {{0.5, 1, 2}}};
  auto cell = ag.cell_anchors(0);
  auto want =
      torch::tensor({-23.f, -11.f, 23.f, 11.f, -16.f, -16.f, 16.f, 16.f, -11.f, -23.f, 11.f, 23.f});
  EXPECT_TRUE(torch::equal(cell.flatten(), want));
  // Stride 128 / 4 = 32: the second location's anchors are shifted by 32 in x.
  auto grid = ag.grid_anchors(64, 128, {{2, 4}});
  ASSERT_EQ(grid.size(0), 2 * 4 * 3);
  EXPECT_TRUE(torch::equal(grid[3], torch::tensor({9.f, -11.f, 55.f, 11.f})));

  // Bilinear interpolation of a linear ramp is exact: each bin averages the ramp at its
  // 2x2 sample points, i.e. the ramp at the bin centre. Map value = x.
  auto ramp = torch::arange(8, torch::kFloat).view({1, 1, 1, 8}).expand({1, 1, 8, 8}).contiguous();
  auto out =
      det::roi_align(ramp, torch::tensor({0.f, 1.f, 1.f, 5.f, 3.f}).view({1, 5}), 1, 2, 1.0, 2);
  EXPECT_NEAR(out[0][0][0][0].item<double>(), 2.0, 1e-6);  // bin [1, 3] centre 2
  EXPECT_NEAR(out[0][0][0][1].item<double>(), 4.0, 1e-6);  // bin [3, 5] centre 4

  // Level of a 224-pixel box is 4, of a 112-pixel box 3, clamped to [2, 5].
  auto lv = det::map_levels(
      torch::tensor({0.f, 0.f, 224.f, 224.f, 0.f, 0.f, 112.f, 112.f, 0.f, 0.f, 8.f, 8.f})
          .view({3, 4}),
      2, 5);
  EXPECT_EQ(lv[0].item<int64_t>(), 2);
  EXPECT_EQ(lv[1].item<int64_t>(), 1);
  EXPECT_EQ(lv[2].item<int64_t>(), 0);
}

TEST(DetectionOps, RoiAlignGradientReachesTheFeatures) {
  auto x = torch::randn({1, 2, 6, 6}, torch::requires_grad());
  auto y =
      det::roi_align(x, torch::tensor({0.f, 0.5f, 0.5f, 4.5f, 3.f}).view({1, 5}), 2, 2, 1.0, 2);
  y.sum().backward();
  // Each output is an average: the gradient of the sum spreads 2x2 bins x 2 channels of mass 1.
  EXPECT_NEAR(x.grad().sum().item<double>(), 8.0, 1e-5);
}

}  // namespace
}  // namespace tb
