#pragma once
// Sequence lengths of the synthetic batches of the translation and speech families, shared
// by the builders (which make the data) and the cost descriptions (which count its work),
// so that both see exactly the same lengths without running the model.
#include <cstdint>

namespace tb {

// Length of sequence `i` of `n`: spread evenly over [lo, hi], longest first, as in a
// length-bucketed batch. The first is always `hi`, so a padded batch is exactly `hi` long.
inline int64_t spread_length(int64_t i, int64_t n, int64_t lo, int64_t hi) {
  if (n <= 1 || hi <= lo) return hi;
  return hi - (i * (hi - lo)) / (n - 1);
}

inline int64_t spread_length_sum(int64_t n, int64_t lo, int64_t hi) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += spread_length(i, n, lo, hi);
  return s;
}

}  // namespace tb
