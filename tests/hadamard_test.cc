// The random Hadamard transform (emulation/hadamard.h): orthogonal, so that the weight-gradient
// product it is folded into is unchanged in exact arithmetic, and what it changes is only what
// rounding sees.
#include "emulation/hadamard.h"

#include <gtest/gtest.h>

#include "base/errors.h"
#include "emulation/numerics_workload.h"
#include "numerics/policy.h"

namespace {

TEST(Hadamard, IsOrthogonalSeededAndRoundTrips) {
  for (int64_t n : {2, 16, 64}) {
    const torch::Tensor t = tb::emu::random_hadamard(n, 7);
    EXPECT_TRUE(torch::allclose(torch::mm(t.t(), t), torch::eye(n), 0, 1e-6)) << n;
    // Every entry is +-1/sqrt(n): a rotation that spreads each value over all n.
    EXPECT_TRUE(torch::allclose(t.abs(), torch::full({n, n}, 1 / std::sqrt(double(n)))));
    EXPECT_TRUE(torch::equal(t, tb::emu::random_hadamard(n, 7)));
    EXPECT_FALSE(torch::equal(t, tb::emu::random_hadamard(n, 8)));
  }
  // Rows in blocks of 16; the 4 rows past the last whole block are left as they are.
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({36, 5}, torch::kDouble);
  const torch::Tensor t = tb::emu::random_hadamard(16, 3).to(torch::kDouble);
  const torch::Tensor y = tb::emu::hadamard_rows(x, t);
  EXPECT_TRUE(torch::equal(y.slice(0, 32), x.slice(0, 32)));
  EXPECT_TRUE(torch::allclose(tb::emu::hadamard_rows(y, t.t()), x, 0, 1e-12));
  // The transposed form dW's inputs use: the same values, with and without a partial block.
  for (const int64_t rows : {int64_t(48), int64_t(36)}) {
    const torch::Tensor v = torch::randn({rows, 7});
    const torch::Tensor t32 = tb::emu::random_hadamard(16, 3);
    const torch::Tensor want = tb::emu::hadamard_rows(v, t32).t();
    const torch::Tensor got = tb::emu::hadamard_rows_t(v, t32);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(torch::allclose(got, want, 1e-6, 1e-6)) << rows;
  }
  // (T a)^T (T b) = a^T b: the weight gradient's product is unchanged.
  const torch::Tensor a = torch::randn({36, 3}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(torch::mm(tb::emu::hadamard_rows(a, t).t(), y), torch::mm(a.t(), x),
                              0, 1e-12));
}

// rht_linear's gradients: with nothing rounded they are plain linear's (to float rounding);
// with nvfp4 points the transform's seed changes the weight gradient and nothing else.
TEST(Hadamard, LinearGradientsAreLinearsWithoutRounding) {
  torch::manual_seed(2);
  const torch::Tensor x0 = torch::randn({64, 32});
  const torch::Tensor w0 = torch::randn({8, 32});
  const torch::Tensor b0 = torch::randn({8});
  auto grads = [&](const tb::emu::Policy* p) {
    torch::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(),
                  b = b0.clone().requires_grad_();
    const torch::Tensor y =
        p ? tb::emu::rht_linear(x, w, b, *p, -1) : torch::nn::functional::linear(x, w, b);
    (y * torch::arange(8.0f)).sum().backward();
    return std::vector<torch::Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  tb::emu::Policy p = tb::emu::policy_from(tb::num::parse_numerics("rht:16"), 0);
  ASSERT_EQ(p.rht_size, 16);
  const auto want = grads(nullptr), got = grads(&p);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-5)) << i;
  // Rounded to NVFP4: the transform changes the weight gradient, not the forward value.
  tb::emu::Policy q = tb::emu::policy_from(tb::num::parse_numerics("a:nvfp4+e:nvfp4+rht:16"), 0);
  tb::emu::Policy r = tb::emu::policy_from(tb::num::parse_numerics("a:nvfp4+e:nvfp4+rht:16:9"), 0);
  const auto with = grads(&q), other_seed = grads(&r);
  EXPECT_TRUE(torch::equal(with[0], other_seed[0]));
  EXPECT_TRUE(torch::equal(with[1], other_seed[1]));
  EXPECT_FALSE(torch::equal(with[2], other_seed[2]));
  EXPECT_LT((with[2] - want[2]).abs().max().item<float>(),
            0.5f * want[2].abs().max().item<float>());
  // A [batch, tokens, features] input without a bias: rows are batch x tokens.
  {
    torch::Tensor x = torch::randn({4, 8, 32}).requires_grad_(), w = w0.clone().requires_grad_();
    tb::emu::rht_linear(x, w, torch::Tensor(), p, -1).pow(2).sum().backward();
    torch::Tensor x2 = x.detach().clone().requires_grad_(), w2 = w0.clone().requires_grad_();
    torch::nn::functional::linear(x2, w2).pow(2).sum().backward();
    EXPECT_EQ(x.grad().sizes(), x.sizes());
    EXPECT_TRUE(torch::allclose(x.grad(), x2.grad(), 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(w.grad(), w2.grad(), 1e-4, 1e-4));
  }
  // A training batch with fewer rows than one block: nothing would be transformed.
  {
    torch::Tensor x = torch::randn({4, 32}), w = w0.clone().requires_grad_();
    EXPECT_THROW(tb::emu::rht_linear(x, w, torch::Tensor(), p, -1), tb::UsageError);
    torch::NoGradGuard evaluating;
    EXPECT_EQ(tb::emu::rht_linear(x, w, torch::Tensor(), p, -1).sizes(),
              (std::vector<int64_t>{4, 8}));
  }
  EXPECT_THROW(tb::num::parse_numerics("rht:12"), tb::UsageError);
  EXPECT_THROW(tb::num::parse_numerics("rht:16:x"), tb::UsageError);
  EXPECT_THROW(tb::num::parse_numerics("rht.0:16"), tb::UsageError);
  EXPECT_EQ(tb::num::parse_numerics("e4m3+rht:16:3").str(), "e4m3+rht:16:3");
}

}  // namespace
