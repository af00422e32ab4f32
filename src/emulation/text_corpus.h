#pragma once
// The language task's text: GCIDE, the GNU Collaborative International Dictionary of English
// (Webster's 1913 with additions; GPL-2+), as Debian's dict-gcide package ships it, read as
// bytes: one token per byte, a vocabulary of 256. Its ~40 MB are English definitions,
// quotations and etymologies with the dictionary's light markup, in alphabetical order; an
// interleaved split keeps the held-out text from being one end of the alphabet.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace tb::emu {

constexpr const char* kGcidePath = "/usr/share/dictd/gcide.dict.dz";
// The split: the text in blocks of this many bytes, every kValidationEvery-th block (the
// last of each group) held out for validation, the rest concatenated for training (5%/95%).
constexpr int64_t kCorpusBlock = 4096;
constexpr int64_t kValidationEvery = 20;

struct TextCorpus {
  std::string name, path;
  torch::Tensor train, validation;  // [n] uint8: the bytes
};

// The corpus names `emulate --dataset` takes besides fashion-mnist.
bool is_text_corpus(const std::string& name);

// name: "gcide". Throws UsageError for another name, or naming the file when it is missing
// (install the Debian package dict-gcide) or too short to split.
TextCorpus load_text_corpus(const std::string& name, const std::string& path = kGcidePath);

// `count` windows of `length` + 1 tokens (inputs and their next tokens) evenly spaced over
// `tokens`, the same every time: the held-out set an evaluation scores. [count, length + 1], in
// tokens' dtype.
torch::Tensor evenly_spaced_windows(const torch::Tensor& tokens, int64_t count, int64_t length);

}  // namespace tb::emu
