#include "numerics/scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "numerics/round_bits.h"

namespace tb::num {
namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();

bool all_digits(const std::string& s, size_t max_len) {
  return !s.empty() && s.size() <= max_len &&
         s.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1)
    out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

}  // namespace

std::string Scaling::str() const {
  switch (kind) {
    case Kind::kNone:
      return "";
    case Kind::kCurrent:
      return margin ? "current:" + std::to_string(margin) : "current";
    case Kind::kDelayed: {
      std::string s = "delayed:" + std::to_string(history) + ":" + (most_recent ? "recent" : "max");
      return margin ? s + ":" + std::to_string(margin) : s;
    }
    case Kind::kBlock:
      return "block:" + std::to_string(block_rows) + "x" + std::to_string(block_cols) +
             (pow2 ? ":pow2" : "");
  }
  return "";
}

bool Scaling::operator==(const Scaling& o) const { return str() == o.str(); }

Scaling parse_scaling(const std::string& text, const Format& f, const std::string& format_text) {
  const std::vector<std::string> p = split(text, ':');
  Scaling s;
  auto margin = [&](const std::string& m) {
    if (!all_digits(m, 2))
      throw UsageError("scaling '" + text + "': margin '" + m + "' (expected 0-99)");
    return std::stoi(m);
  };
  if (p[0] == "current" && p.size() <= 2) {
    s.kind = Scaling::Kind::kCurrent;
    if (p.size() == 2) s.margin = margin(p[1]);
  } else if (p[0] == "delayed" && p.size() <= 4) {
    s.kind = Scaling::Kind::kDelayed;
    if (p.size() >= 2) {
      if (!all_digits(p[1], 6) || std::stoi(p[1]) < 1 || std::stoi(p[1]) > 100000)
        throw UsageError("scaling '" + text + "': history length '" + p[1] +
                         "' (expected 1-100000 steps)");
      s.history = std::stoi(p[1]);
    }
    if (p.size() >= 3) {
      if (p[2] != "max" && p[2] != "recent")
        throw UsageError("scaling '" + text + "': amax algorithm '" + p[2] +
                         "' (expected max or recent)");
      s.most_recent = p[2] == "recent";
    }
    if (p.size() == 4) s.margin = margin(p[3]);
  } else if (p[0] == "block" && (p.size() == 2 || p.size() == 3)) {
    s.kind = Scaling::Kind::kBlock;
    const auto x = p[1].find('x');
    const std::string r = x == std::string::npos ? "" : p[1].substr(0, x),
                      c = x == std::string::npos ? "" : p[1].substr(x + 1);
    if (!all_digits(r, 4) || !all_digits(c, 4) || std::stoi(r) < 1 || std::stoi(c) < 1 ||
        std::stoi(r) > 4096 || std::stoi(c) > 4096)
      throw UsageError("scaling '" + text + "': block '" + p[1] +
                       "' (expected RxC, rows and columns 1-4096, e.g. 1x128)");
    s.block_rows = std::stoi(r);
    s.block_cols = std::stoi(c);
    if (p.size() == 3) {
      if (p[2] != "pow2")
        throw UsageError("scaling '" + text + "': '" + p[2] + "' (expected pow2 or nothing)");
      s.pow2 = true;
    }
  } else {
    throw UsageError("scaling '" + text +
                     "' (expected current[:M], delayed[:H[:max|recent[:M]]] or block:RxC[:pow2])");
  }
  if (f.kind == Format::Kind::kBlock)
    throw UsageError("scaling '" + text + "' on '" + format_text +
                     "': scaling recipes apply to element formats (block formats carry their own "
                     "scales)");
  return s;
}

Format saturating(Format f) {
  if (f.kind == Format::Kind::kFloat) f.fp.overflow = Overflow::kSaturate;
  if (f.kind == Format::Kind::kFixed) f.fx.saturate = true;
  return f;
}

float scaling_max(const Format& f) {
  return float(f.kind == Format::Kind::kFixed ? f.fx.max_value() : f.fp.max_finite());
}

float overflow_threshold(const Format& f) {
  if (f.kind == Format::Kind::kFixed)
    return float(f.fx.max_value() + std::ldexp(0.5, -f.fx.frac_bits));
  const double max = f.fp.max_finite();
  const double tie = max + std::ldexp(1.0, f.fp.emax() - f.fp.man_bits - 1);
  // The tie rounds to even: down to the max where its last mantissa bit is 0 (e4m3's 448), so
  // only values past it overflow; up where it is 1 (e5m2's 57344).
  const bool max_even = std::fmod(std::ldexp(max, f.fp.man_bits - f.fp.emax()), 2.0) == 0;
  return max_even ? std::nextafter(float(tie), INFINITY) : float(tie);
}

float current_scale(float max, float amax, int margin) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1;
  // Transformer Engine's order: (max / amax) / 2^margin.
  const float scale = max / amax / std::ldexp(1.0f, margin);
  return std::isinf(scale) ? kFltMax : scale;  // a tiny amax: the largest scale there is
}

float block_scale(float max, float amax, bool pow2) {
  if (amax == 0 || std::isinf(amax) || std::isnan(amax)) return 1;
  float scale = max / amax;
  if (std::isinf(scale)) scale = kFltMax;
  if (pow2) scale = std::ldexp(1.0f, std::ilogb(scale));  // the mantissa dropped
  return scale;
}

void AmaxHistory::record(float amax) { h_[0] = std::fmax(h_[0], amax); }

void AmaxHistory::end_step(float max, int margin, bool most_recent) {
  const float last = h_[0];
  float amax = 0;
  if (last != 0) {  // a site not used this step keeps its history and scale
    const size_t n = h_.size();
    for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, h_[i]);
    // Rolled one place: the oldest ([1]) dropped, this step's amax appended, [0] cleared.
    for (size_t i = 1; i + 1 < n; ++i) h_[i] = h_[i + 1];
    if (n > 1) h_[n - 1] = last;
    h_[0] = 0;
  }
  if (most_recent) amax = last;
  const float scaled_max = max * std::pow(2.0f, float(-margin));
  float scale = std::isfinite(amax) && amax > 0 ? scaled_max / amax : scale_;
  if (std::isinf(scale)) scale = kFltMax;
  scale_ = scale;
}

std::vector<float> AmaxHistory::window() const {
  std::vector<float> out;
  for (size_t i = 1; i < h_.size(); ++i)
    if (h_[i] != 0) out.push_back(h_[i]);
  if (h_[0] != 0) out.push_back(h_[0]);
  return out;
}

RangeCounts& RangeCounts::operator+=(const RangeCounts& o) {
  values += o.values;
  overflow += o.overflow;
  underflow += o.underflow;
  nonfinite += o.nonfinite;
  return *this;
}

RangeCounts count_range(const float* scaled, const float* q, size_t n, float threshold) {
  RangeCounts c;
  c.values = n;
  // On the bit patterns (magnitudes order as their bits): integer compares that vectorise.
  const uint32_t thr = kernel::as_bits(threshold), inf = 0x7F800000u;
  uint64_t over = 0, under = 0, bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = kernel::as_bits(scaled[i]) & 0x7FFFFFFFu;
    const uint32_t b = kernel::as_bits(q[i]) & 0x7FFFFFFFu;
    bad += a >= inf;
    over += (a < inf) & (a >= thr);
    under += (a != 0) & (b == 0);
  }
  c.overflow = over;
  c.underflow = under;
  c.nonfinite = bad;
  return c;
}

void quantize_block_scaled(const Format& f, const Scaling& s, const float* in, float* out, size_t n,
                           size_t row, const QuantOptions& o, RangeCounts* counts) {
  if (n == 0) return;
  if (row == 0) row = n;
  // A row shorter than the tile is one tile wide (a bias, a small output layer).
  const size_t bc = std::min(size_t(s.block_cols), row), br = size_t(s.block_rows);
  if (row % bc != 0)
    throw UsageError("scaling 'block:" + std::to_string(br) + "x" + std::to_string(bc) +
                     "': " + std::to_string(bc) + " columns do not divide the tensor's rows of " +
                     std::to_string(row));
  if (n % row != 0)
    throw UsageError("scaling 'block:" + std::to_string(br) + "x" + std::to_string(bc) + "': " +
                     std::to_string(n) + " values are not whole rows of " + std::to_string(row));
  const float max = scaling_max(f);
  const size_t rows = n / row;
  const size_t bands = (rows + br - 1) / br;
  // A tensor past the last-level cache is written with non-temporal stores (quantize()'s rule):
  // a plain store of a line that is not cached reads it first, a third of the traffic.
  const size_t stream_above = o.stream_above ? o.stream_above : stream_min_elements();
  const bool stream = n > stream_above && (out + n <= in || in + n <= out);
  // Bands [b0, b1) of br rows; each call keeps its own buffers.
  auto run = [&](size_t b0, size_t b1, RangeCounts* c) {
    std::vector<float> scale(row / bc), amax(row / bc), scaled, q;
    QuantOptions part = o;
    part.threads = 1;
    part.row = 0;
    part.input_amax = nullptr;  // quantize()'s option, not this one's
    for (size_t r0 = b0 * br; r0 < std::min(rows, b1 * br); r0 += br) {
      const size_t band = std::min(br, rows - r0);
      for (size_t i = 0; i < band; ++i)
        block_amaxes(in + (r0 + i) * row, row, bc, amax.data(), i > 0);
      for (size_t b = 0; b < scale.size(); ++b) scale[b] = block_scale(max, amax[b], s.pow2);
      for (size_t i = 0; i < band; ++i) {
        const size_t at = (r0 + i) * row;
        // Each block scaled, rounded and scaled back in one pass: float formats take a scale
        // in the rounding pass, fixed point does not.
        if (!c && f.kind == Format::Kind::kFloat) {
          part.offset = o.offset + at;
          quantize_blocks_scaled(f, in + at, out + at, row, bc, scale.data(), part, stream);
          continue;
        }
        scaled.resize(row);
        q.resize(row);
        for (size_t b = 0; b < scale.size(); ++b) {
          const float sc = scale[b];
          for (size_t j = b * bc; j < (b + 1) * bc; ++j) scaled[j] = in[at + j] * sc;
        }
        part.scale = 1;
        part.offset = o.offset + at;
        quantize(f, scaled.data(), q.data(), row, part);
        if (c) *c += count_range(scaled.data(), q.data(), row, overflow_threshold(f));
        for (size_t b = 0; b < scale.size(); ++b) {
          const float inv = 1.0f / scale[b];
          for (size_t j = b * bc; j < (b + 1) * bc; ++j) out[at + j] = q[j] * inv;
        }
      }
    }
  };
  // Large tensors over threads, in whole bands (counting stays on one: the counts add up).
  int threads = o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency());
  threads = int(std::min<size_t>({size_t(std::max(threads, 1)), n / 65536 + 1, bands}));
  if (threads <= 1 || counts) return run(0, bands, counts);
  split_over_threads(bands, threads, [&](size_t, size_t b0, size_t b1) { run(b0, b1, nullptr); });
}

ScaledRow scale_row(const Format& f, const Scaling& s, const std::vector<float>& x,
                    const QuantOptions& given) {
  const std::string name = "scaling '" + s.str() + "'";
  if (s.kind == Scaling::Kind::kDelayed)
    throw UsageError(name +
                     ": delayed scaling takes its scale from earlier steps' amaxes, and one call "
                     "has none (its first step's scale is 1); @current scales by these values' "
                     "amax, and trainbench emulate runs the steps");
  if (s.kind == Scaling::Kind::kBlock && s.block_rows != 1)
    throw UsageError(name + ": one row of values has no tiles of " + std::to_string(s.block_rows) +
                     " rows (use block:1x" + std::to_string(s.block_cols) + ")");
  if (s.kind != Scaling::Kind::kCurrent && s.kind != Scaling::Kind::kBlock)
    throw UsageError("scale_row: no scaling recipe");
  QuantOptions o = given;
  o.threads = 1;
  o.row = 0;
  o.input_amax = nullptr;
  const size_t n = x.size();
  ScaledRow r;
  r.out.resize(n);
  const float max = scaling_max(f);
  if (s.kind == Scaling::Kind::kCurrent) {
    const float amax = tensor_amax(x.data(), n, 1);
    r.tiles.push_back({0, n, amax, current_scale(max, amax, s.margin)});
  } else {
    quantize_block_scaled(f, s, x.data(), r.out.data(), n, n, o, nullptr);  // checks the shape
    const size_t bc = std::min(size_t(s.block_cols), n);
    for (size_t b = 0; b < n; b += bc) {
      float amax = 0;
      block_amaxes(x.data() + b, bc, bc, &amax, false);
      r.tiles.push_back({b, bc, amax, block_scale(max, amax, s.pow2)});
    }
  }
  r.scaled.resize(n);
  for (const auto& t : r.tiles)
    for (size_t i = t.first; i < t.first + t.count; ++i) r.scaled[i] = x[i] * t.scale;
  o.scale = 1;
  r.rounded = quantize(f, r.scaled, o);
  // A current-scaled float point scales inside the quantizer (the same float32 products); a
  // fixed-point one, as block scaling, multiplies the rounded values by the inverse.
  if (s.kind == Scaling::Kind::kCurrent && f.kind == Format::Kind::kFloat) {
    o.scale = r.tiles[0].scale;
    quantize(f, x.data(), r.out.data(), n, o);
  } else if (s.kind == Scaling::Kind::kCurrent) {
    const float inv = 1.0f / r.tiles[0].scale;
    for (size_t i = 0; i < n; ++i) r.out[i] = r.rounded[i] * inv;
  }
  return r;
}

}  // namespace tb::num
