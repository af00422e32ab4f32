#include "emulation/text_corpus.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "emulation/gzip_file.h"

namespace tb::emu {

bool is_text_corpus(const std::string& name) { return name == "gcide"; }

TextCorpus load_text_corpus(const std::string& name, const std::string& path) {
  if (!is_text_corpus(name))
    throw UsageError("dataset '" + name + "' (expected fashion-mnist or gcide)");
  const std::vector<uint8_t> text = read_gzip(path, "GCIDE: apt-get install dict-gcide");
  const int64_t n = int64_t(text.size());
  if (n < kCorpusBlock * kValidationEvery)
    throw UsageError(
        fmt::format("'{}' has {} bytes, too few to split into training and "
                    "validation text (at least {})",
                    path, n, kCorpusBlock * kValidationEvery));
  // Bytes as bytes (uint8): 40 MB, where int64 tokens would hold 320 MB; a batch's windows are
  // widened when they are drawn.
  std::vector<uint8_t> train, validation;
  train.reserve(size_t(n));
  for (int64_t at = 0; at < n; at += kCorpusBlock) {
    const bool held_out = (at / kCorpusBlock) % kValidationEvery == kValidationEvery - 1;
    auto& to = held_out ? validation : train;
    to.insert(to.end(), text.begin() + at, text.begin() + std::min(n, at + kCorpusBlock));
  }
  const auto as_tensor = [](std::vector<uint8_t>& v) {
    return torch::from_blob(v.data(), {int64_t(v.size())}, torch::kUInt8).clone();
  };
  return {name, path, as_tensor(train), as_tensor(validation)};
}

torch::Tensor evenly_spaced_windows(const torch::Tensor& tokens, int64_t count, int64_t length) {
  const int64_t room = tokens.size(0) - (length + 1);
  if (count < 1 || room < 0)
    throw UsageError(
        fmt::format("{} held-out windows of seq + 1 = {} bytes: the validation "
                    "text has {} bytes (a shorter seq, or 1 or more windows)",
                    count, length + 1, tokens.size(0)));
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < count; ++i)
    rows.push_back(
        tokens.slice(0, room * i / std::max<int64_t>(1, count - 1)).slice(0, 0, length + 1));
  return torch::stack(rows);
}

}  // namespace tb::emu
