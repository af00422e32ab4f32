#pragma once
// The language task: a gpt config (model/gpt.cc) trained on GCIDE's bytes (text_corpus.h) to a
// validation loss, with the emulated formats at the points numerics= puts them.
#include "emulation/emulate.h"
#include "emulation/text_corpus.h"
#include "spec/config.h"

namespace tb::emu {

// The model `emulate --dataset gcide` trains when --model names none, and the validation loss
// (nats per byte) its fp32 training flattens near: the default --target-loss for it. The
// target is chosen from fp32 runs of this model (docs/numerics.md says how); another model
// needs its own --target-loss.
constexpr const char* kLanguageModel =
    "gpt:layers=1,d_model=64,heads=2,kv_heads=2,ff=256,seq=64,vocab=256";
constexpr double kLanguageTargetLoss = 1.66;
constexpr double kLanguageLr = 3e-3;
// Held-out windows per evaluation when --eval-examples is not given.
constexpr int64_t kLanguageEvalWindows = 128;

// The config as trained: a gpt config with vocab=256 (byte tokens); batch from `batch`,
// optimizer adamw, fp32 on the CPU, one worker, numerics=fp32 (the formats come from the
// Policy). Throws UsageError naming the value that does not fit.
Config language_model_config(const std::string& model, int64_t batch);

// One seed's run: mini-batches of windows at random offsets of the training text (the seed
// draws them and the weights), AdamW (betas 0.9, 0.95, weight decay 0.1, as GPT-3 trained) at
// o.lr, and the mean next-byte cross-entropy over o.eval_examples held-out windows evenly
// spaced over the validation text at every evaluation.
SeedRun train_language(const EmulationOptions& o, const Policy& p, const TextCorpus& corpus,
                       uint64_t seed, const Progress& progress);

}  // namespace tb::emu
