// Inception-v3 (Szegedy et al. 2016; torchvision's Inception3 with aux_logits=True,
// transform_input=False), trained as torchvision's reference trains it: the loss is
// CE(logits) + 0.4 x CE(aux_logits), the auxiliary head running only in training mode.
// RMSprop (decay 0.9, momentum 0.9, eps 1.0) as Google trained it. Module names are
// torchvision's (Conv2d_1a_3x3.conv, Mixed_5b.branch1x1.bn, AuxLogits.fc, ...).
//
// The auxiliary head pools the 17x17 Mixed_6e output with a 5x5/3 window and then applies
// a 5x5 convolution without padding: it needs Mixed_6e to be at least 17 pixels, which
// takes an input of at least 299 (torchvision's min_size of 75 holds only without it).
#include "model/image_classifier.h"

namespace tb {
namespace {

namespace nn = torch::nn;

struct BasicConv2dImpl : nn::Module {
  BasicConv2dImpl(int64_t in, int64_t out, std::array<int64_t, 2> k, int64_t stride = 1,
                  std::array<int64_t, 2> pad = {0, 0})
      : conv(register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, {k[0], k[1]})
                                                    .stride(stride)
                                                    .padding({pad[0], pad[1]})
                                                    .bias(false)))),
        bn(register_module("bn", nn::BatchNorm2d(nn::BatchNorm2dOptions(out).eps(0.001)))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return relu_op(bn->forward(layer_op(conv, x)), /*inplace=*/true);
  }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
};
TORCH_MODULE(BasicConv2d);

// Square kernel k with padding p.
BasicConv2d sq(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return BasicConv2d(in, out, std::array<int64_t, 2>{k, k}, stride,
                     std::array<int64_t, 2>{pad, pad});
}
// The factorised 1x7 / 7x1 (1x3 / 3x1) kernels, padded to keep the size.
BasicConv2d row(int64_t in, int64_t out, int64_t k) {
  return BasicConv2d(in, out, std::array<int64_t, 2>{1, k}, 1, std::array<int64_t, 2>{0, k / 2});
}
BasicConv2d col(int64_t in, int64_t out, int64_t k) {
  return BasicConv2d(in, out, std::array<int64_t, 2>{k, 1}, 1, std::array<int64_t, 2>{k / 2, 0});
}

torch::Tensor same_avg_pool(const torch::Tensor& x) { return torch::avg_pool2d(x, 3, 1, 1); }

struct InceptionAImpl : nn::Module {
  InceptionAImpl(int64_t in, int64_t pool_features)
      : branch1x1(register_module("branch1x1", sq(in, 64, 1))),
        branch5x5_1(register_module("branch5x5_1", sq(in, 48, 1))),
        branch5x5_2(register_module("branch5x5_2", sq(48, 64, 5, 1, 2))),
        branch3x3dbl_1(register_module("branch3x3dbl_1", sq(in, 64, 1))),
        branch3x3dbl_2(register_module("branch3x3dbl_2", sq(64, 96, 3, 1, 1))),
        branch3x3dbl_3(register_module("branch3x3dbl_3", sq(96, 96, 3, 1, 1))),
        branch_pool(register_module("branch_pool", sq(in, pool_features, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({branch1x1->forward(x), branch5x5_2->forward(branch5x5_1->forward(x)),
                       branch3x3dbl_3->forward(branch3x3dbl_2->forward(branch3x3dbl_1->forward(x))),
                       branch_pool->forward(same_avg_pool(x))},
                      1);
  }
  BasicConv2d branch1x1, branch5x5_1, branch5x5_2, branch3x3dbl_1, branch3x3dbl_2, branch3x3dbl_3,
      branch_pool;
};
TORCH_MODULE(InceptionA);

struct InceptionBImpl : nn::Module {
  explicit InceptionBImpl(int64_t in)
      : branch3x3(register_module("branch3x3", sq(in, 384, 3, 2))),
        branch3x3dbl_1(register_module("branch3x3dbl_1", sq(in, 64, 1))),
        branch3x3dbl_2(register_module("branch3x3dbl_2", sq(64, 96, 3, 1, 1))),
        branch3x3dbl_3(register_module("branch3x3dbl_3", sq(96, 96, 3, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({branch3x3->forward(x),
                       branch3x3dbl_3->forward(branch3x3dbl_2->forward(branch3x3dbl_1->forward(x))),
                       torch::max_pool2d(x, 3, 2)},
                      1);
  }
  BasicConv2d branch3x3, branch3x3dbl_1, branch3x3dbl_2, branch3x3dbl_3;
};
TORCH_MODULE(InceptionB);

struct InceptionCImpl : nn::Module {
  InceptionCImpl(int64_t in, int64_t c7)
      : branch1x1(register_module("branch1x1", sq(in, 192, 1))),
        branch7x7_1(register_module("branch7x7_1", sq(in, c7, 1))),
        branch7x7_2(register_module("branch7x7_2", row(c7, c7, 7))),
        branch7x7_3(register_module("branch7x7_3", col(c7, 192, 7))),
        branch7x7dbl_1(register_module("branch7x7dbl_1", sq(in, c7, 1))),
        branch7x7dbl_2(register_module("branch7x7dbl_2", col(c7, c7, 7))),
        branch7x7dbl_3(register_module("branch7x7dbl_3", row(c7, c7, 7))),
        branch7x7dbl_4(register_module("branch7x7dbl_4", col(c7, c7, 7))),
        branch7x7dbl_5(register_module("branch7x7dbl_5", row(c7, 192, 7))),
        branch_pool(register_module("branch_pool", sq(in, 192, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto b7 = branch7x7_3->forward(branch7x7_2->forward(branch7x7_1->forward(x)));
    auto d7 = branch7x7dbl_1->forward(x);
    d7 = branch7x7dbl_5->forward(
        branch7x7dbl_4->forward(branch7x7dbl_3->forward(branch7x7dbl_2->forward(d7))));
    return torch::cat({branch1x1->forward(x), b7, d7, branch_pool->forward(same_avg_pool(x))}, 1);
  }
  BasicConv2d branch1x1, branch7x7_1, branch7x7_2, branch7x7_3, branch7x7dbl_1, branch7x7dbl_2,
      branch7x7dbl_3, branch7x7dbl_4, branch7x7dbl_5, branch_pool;
};
TORCH_MODULE(InceptionC);

struct InceptionDImpl : nn::Module {
  explicit InceptionDImpl(int64_t in)
      : branch3x3_1(register_module("branch3x3_1", sq(in, 192, 1))),
        branch3x3_2(register_module("branch3x3_2", sq(192, 320, 3, 2))),
        branch7x7x3_1(register_module("branch7x7x3_1", sq(in, 192, 1))),
        branch7x7x3_2(register_module("branch7x7x3_2", row(192, 192, 7))),
        branch7x7x3_3(register_module("branch7x7x3_3", col(192, 192, 7))),
        branch7x7x3_4(register_module("branch7x7x3_4", sq(192, 192, 3, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto b7 = branch7x7x3_4->forward(
        branch7x7x3_3->forward(branch7x7x3_2->forward(branch7x7x3_1->forward(x))));
    return torch::cat(
        {branch3x3_2->forward(branch3x3_1->forward(x)), b7, torch::max_pool2d(x, 3, 2)}, 1);
  }
  BasicConv2d branch3x3_1, branch3x3_2, branch7x7x3_1, branch7x7x3_2, branch7x7x3_3, branch7x7x3_4;
};
TORCH_MODULE(InceptionD);

struct InceptionEImpl : nn::Module {
  explicit InceptionEImpl(int64_t in)
      : branch1x1(register_module("branch1x1", sq(in, 320, 1))),
        branch3x3_1(register_module("branch3x3_1", sq(in, 384, 1))),
        branch3x3_2a(register_module("branch3x3_2a", row(384, 384, 3))),
        branch3x3_2b(register_module("branch3x3_2b", col(384, 384, 3))),
        branch3x3dbl_1(register_module("branch3x3dbl_1", sq(in, 448, 1))),
        branch3x3dbl_2(register_module("branch3x3dbl_2", sq(448, 384, 3, 1, 1))),
        branch3x3dbl_3a(register_module("branch3x3dbl_3a", row(384, 384, 3))),
        branch3x3dbl_3b(register_module("branch3x3dbl_3b", col(384, 384, 3))),
        branch_pool(register_module("branch_pool", sq(in, 192, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto b3 = branch3x3_1->forward(x);
    b3 = torch::cat({branch3x3_2a->forward(b3), branch3x3_2b->forward(b3)}, 1);
    auto d3 = branch3x3dbl_2->forward(branch3x3dbl_1->forward(x));
    d3 = torch::cat({branch3x3dbl_3a->forward(d3), branch3x3dbl_3b->forward(d3)}, 1);
    return torch::cat({branch1x1->forward(x), b3, d3, branch_pool->forward(same_avg_pool(x))}, 1);
  }
  BasicConv2d branch1x1, branch3x3_1, branch3x3_2a, branch3x3_2b, branch3x3dbl_1, branch3x3dbl_2,
      branch3x3dbl_3a, branch3x3dbl_3b, branch_pool;
};
TORCH_MODULE(InceptionE);

struct InceptionAuxImpl : nn::Module {
  InceptionAuxImpl(int64_t in, int64_t classes)
      : conv0(register_module("conv0", sq(in, 128, 1))),
        conv1(register_module("conv1", sq(128, 768, 5))),
        fc(register_module("fc", nn::Linear(768, classes))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = conv1->forward(conv0->forward(torch::avg_pool2d(x, 5, 3)));
    return layer_op(fc, torch::flatten(torch::adaptive_avg_pool2d(y, {1, 1}), 1));
  }
  BasicConv2d conv0, conv1;
  nn::Linear fc;
};
TORCH_MODULE(InceptionAux);

struct Inception3Impl : nn::Module {
  explicit Inception3Impl(int64_t classes)
      : Conv2d_1a_3x3(register_module("Conv2d_1a_3x3", sq(3, 32, 3, 2))),
        Conv2d_2a_3x3(register_module("Conv2d_2a_3x3", sq(32, 32, 3))),
        Conv2d_2b_3x3(register_module("Conv2d_2b_3x3", sq(32, 64, 3, 1, 1))),
        Conv2d_3b_1x1(register_module("Conv2d_3b_1x1", sq(64, 80, 1))),
        Conv2d_4a_3x3(register_module("Conv2d_4a_3x3", sq(80, 192, 3))),
        Mixed_5b(register_module("Mixed_5b", InceptionA(192, 32))),
        Mixed_5c(register_module("Mixed_5c", InceptionA(256, 64))),
        Mixed_5d(register_module("Mixed_5d", InceptionA(288, 64))),
        Mixed_6a(register_module("Mixed_6a", InceptionB(288))),
        Mixed_6b(register_module("Mixed_6b", InceptionC(768, 128))),
        Mixed_6c(register_module("Mixed_6c", InceptionC(768, 160))),
        Mixed_6d(register_module("Mixed_6d", InceptionC(768, 160))),
        Mixed_6e(register_module("Mixed_6e", InceptionC(768, 192))),
        AuxLogits(register_module("AuxLogits", InceptionAux(768, classes))),
        Mixed_7a(register_module("Mixed_7a", InceptionD(768))),
        Mixed_7b(register_module("Mixed_7b", InceptionE(1280))),
        Mixed_7c(register_module("Mixed_7c", InceptionE(2048))),
        dropout(register_module("dropout", nn::Dropout(0.5))),
        fc(register_module("fc", nn::Linear(2048, classes))) {
    // torchvision's initialisation: truncated N(0, 0.1) for every convolution and linear
    // weight (AuxLogits.fc: 0.001), unit BN scale. Its truncation at +-2 is 20 standard
    // deviations out, so a clamped normal draw is the same distribution in practice
    // (LibTorch 1.13 has no trunc_normal_).
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      torch::Tensor w;
      if (auto* c = m->as<nn::Conv2d>()) w = c->weight;
      if (auto* l = m->as<nn::Linear>()) w = l->weight;
      if (w.defined()) {
        const double std = m.get() == AuxLogits->fc.get() ? 0.001 : 0.1;
        w.normal_(0.0, std).clamp_(-2.0, 2.0);
      } else if (auto* b = m->as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      }
    }
  }
  // Logits, and the auxiliary head's logits in training mode (undefined otherwise).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input) {
    auto x = Conv2d_2b_3x3->forward(Conv2d_2a_3x3->forward(Conv2d_1a_3x3->forward(input)));
    x = torch::max_pool2d(x, 3, 2);
    x = Conv2d_4a_3x3->forward(Conv2d_3b_1x1->forward(x));
    x = torch::max_pool2d(x, 3, 2);
    x = Mixed_5d->forward(Mixed_5c->forward(Mixed_5b->forward(x)));
    x = Mixed_6a->forward(x);
    x = Mixed_6e->forward(Mixed_6d->forward(Mixed_6c->forward(Mixed_6b->forward(x))));
    torch::Tensor aux;
    if (is_training()) aux = AuxLogits->forward(x);
    x = Mixed_7c->forward(Mixed_7b->forward(Mixed_7a->forward(x)));
    x = torch::flatten(dropout->forward(torch::adaptive_avg_pool2d(x, {1, 1})), 1);
    return {layer_op(fc, x), aux};
  }
  BasicConv2d Conv2d_1a_3x3, Conv2d_2a_3x3, Conv2d_2b_3x3, Conv2d_3b_1x1, Conv2d_4a_3x3;
  InceptionA Mixed_5b, Mixed_5c, Mixed_5d;
  InceptionB Mixed_6a;
  InceptionC Mixed_6b, Mixed_6c, Mixed_6d, Mixed_6e;
  InceptionAux AuxLogits;
  InceptionD Mixed_7a;
  InceptionE Mixed_7b, Mixed_7c;
  nn::Dropout dropout;
  nn::Linear fc;
};
TORCH_MODULE(Inception3);

class Inception3Workload : public ImageClassifierWorkload {
 public:
  explicit Inception3Workload(const Config& c)
      : ImageClassifierWorkload(c), net_(c.get_int("classes")) {}
  torch::nn::Module& module() override { return *net_; }
  torch::Tensor loss(const Batch& b) override {
    namespace F = torch::nn::functional;
    auto [logits, aux] = net_->forward(b.inputs[0]);
    auto loss = F::cross_entropy(activation_point(logits), b.target);
    return aux.defined() ? loss + 0.4 * F::cross_entropy(activation_point(aux), b.target) : loss;
  }

 protected:
  torch::Tensor forward(const torch::Tensor& images) override {
    return net_->forward(images).first;
  }

 private:
  Inception3 net_;
};

const bool inception3_registered =
    (register_builder("inception3",
                      [](const Config& c) { return std::make_unique<Inception3Workload>(c); }),
     true);

}  // namespace
}  // namespace tb
