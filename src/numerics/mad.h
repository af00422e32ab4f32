// A custom processing unit: matrix multiply whose products and sums are each rounded to a
// format, as a multiply-add unit of a given vector width would compute them (the seed's
// `new_fp4 mad(new_fp4 a, new_fp4 b)`). Plain C++, no LibTorch.
#pragma once
#include <cstdint>
#include <string>

#include "numerics/format.h"

namespace tb::num {

struct MadUnit {
  // How a dot product's terms are summed.
  enum class Order {
    kSequential,  // acc = R(acc + p_k), k = 0, 1, ...
    kLanes,       // `width` lane accumulators (lane k mod width), then a pairwise tree
    kTree,        // per group of `width` products a pairwise tree, then acc = R(acc + group)
  };
  Format product = Format{};      // each product a*b is rounded to this (default fp32)
  Format accumulator = Format{};  // each sum is rounded to this
  int width = 4;
  Order order = Order::kLanes;
  Rounding rounding = Rounding::kNearestEven;

  // `mad:mul=e5m2,acc=fp16,width=4,order=lanes[,rounding=nearest-even]`; formats are preset
  // names or eXmY. str() round-trips.
  std::string str() const;
  bool operator==(const MadUnit& o) const;
};

MadUnit parse_mad(const std::string& text);

// C[M,N] = A[M,K] B[K,N], all row-major float32. A and B should already hold values of the
// formats the unit reads (quantize them first). Each product and each sum is rounded once,
// exactly: sums and products are formed exactly (TwoSum, double products) and rounded to odd
// into float32 first, which makes the final rounding correct for formats of up to 21 mantissa
// bits; wider formats (fp32) use float32 arithmetic directly. Rows of C are split over threads.
void mad_matmul(const MadUnit& unit, const float* A, const float* B, float* C, int64_t M, int64_t N,
                int64_t K, int threads = 1);

// Which kernel mad_matmul would run for this unit and these operands: "lean" (AVX-512, where
// the operands' products are exact and the sums may round once through float32), "fused" (the
// vectorised loop) or "scalar" (stochastic rounding, fixed-point and wide formats).
std::string mad_kernel(const MadUnit& unit, const float* A, const float* B, int64_t M, int64_t N,
                       int64_t K);

}  // namespace tb::num
