#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "base/errors.h"
#include "base/files.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "emulation/descriptor.h"
#include "emulation/emulate.h"
#include "emulation/language_training.h"
#include "emulation/numerics_workload.h"
#include "jobs/sweep_runner.h"
#include "numerics/policy.h"
#include "platform/host.h"
#include "record/context.h"
#include "record/json.h"
#include "report/emulation_table.h"
#include "runner/characterize.h"
#include "runner/threads.h"
#include "spec/printable.h"
#include "store/store.h"

namespace tb::cli {

Command add_emulate(CLI::App& app) {
  struct Args {
    emu::EmulationOptions o;
    std::string weights = "off", activations = "off", errors = "off", weight_grads = "off",
                state = "off", master = "off", all, loss_scale = "none", unit, activation = "relu",
                store, numerics;
    uint64_t quant_seed = 0;
    bool json = false, quiet = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "emulate",
      "Train Fashion-MNIST or a language model in a proposed format/unit/operator: iterations to "
      "accuracy or loss");
  sub->add_option("--model", a->o.model,
                  "mlp (784-256-128-10) | cnn (two conv5x5 + linear) | an fc config with "
                  "input=784,output=10 | a cnn config with image=28,output=10 | with --dataset "
                  "gcide, a gpt config with vocab=256 (default " +
                      std::string(emu::kLanguageModel) + ")");
  sub->add_option("--dataset", a->o.dataset,
                  "fashion-mnist | gcide (English text from Debian's dict-gcide, one token per "
                  "byte: the language task)");
  sub->add_option("--target", a->o.target, "test accuracy to reach (DAWNBench rule)");
  sub->add_option("--target-loss", a->o.target_loss,
                  "the language task's validation loss to reach, nats per byte (default " +
                      fmt::format("{}", emu::kLanguageTargetLoss) + " for the default model)");
  sub->add_option("--seeds", a->o.seeds, "runs, seeds first-seed, first-seed+1, ...");
  sub->add_option("--first-seed", a->o.first_seed, "seed of the first run")
      ->transform(unsigned_integer());
  sub->add_option("--max-iters", a->o.max_iters, "budget per run, in iterations");
  sub->add_option("--eval-every", a->o.eval_every, "evaluate on the test set every K iterations");
  sub->add_option("--count-every", a->o.count_every,
                  "count what rounding did (overflow, underflow, amax, scales) on every N-th "
                  "step, a sample each (0, the default: the step before each evaluation)");
  sub->add_option("--eval-examples", a->o.eval_examples,
                  "test images per evaluation (<= 10000; default all), or held-out text windows "
                  "(default " +
                      std::to_string(emu::kLanguageEvalWindows) + ")");
  sub->add_option("--batch", a->o.batch, "mini-batch size");
  sub->add_option("--lr", a->o.lr,
                  "learning rate: SGD's with momentum 0.9 (default 0.05), or AdamW's on the "
                  "language task (default 0.003)");
  sub->add_option("--threads", a->o.threads, "threads (0: all cores)");
  sub->add_option("--all", a->all, "one format[/rounding] at every quantization point");
  sub->add_option("--weights", a->weights, "format[/rounding] of weights in forward");
  sub->add_option("--activations", a->activations, "... of activations (each layer's input)");
  sub->add_option("--errors", a->errors, "... of activation gradients in backward");
  sub->add_option("--weight-grads", a->weight_grads, "... of weight gradients");
  sub->add_option("--optimizer-state", a->state, "... of the momentum buffer after each step");
  sub->add_option("--master", a->master, "... of the stored (master) weights after each step");
  sub->add_option("--numerics", a->numerics,
                  "all points as numerics= text (docs/numerics.md), per layer with KEY.N items; "
                  "instead of the per-point options");
  sub->add_option("--quant-seed", a->quant_seed, "stochastic rounding seed (mixed with the run's)")
      ->transform(unsigned_integer());
  sub->add_option("--loss-scale", a->loss_scale, "none | static:S | dynamic[:S0]");
  sub->add_option("--unit", a->unit,
                  "every matmul/conv on a custom MAD unit: mad:mul=,acc=,... | ext:PATH");
  sub->add_option("--activation", a->activation, "relu|tanh|sigmoid|tanh-pwl|sigmoid-pwl|ext:PATH");
  sub->add_option("--store", a->store,
                  "results store to add the variant and its per-seed results to (for "
                  "`trainbench tta`)");
  sub->add_flag("--json", a->json, "JSON instead of a table");
  sub->add_flag("--quiet", a->quiet, "no progress lines on stderr");
  sub->footer(
      "Formats: `trainbench formats`; a point takes FORMAT[/ROUNDING][@SCALING], e.g. "
      "e5m2/stochastic, e4m3@delayed (SCALING: current[:M], delayed[:H[:max|recent[:M]]], "
      "block:RxC[:pow2]; docs/numerics.md).\n"
      "Examples:\n"
      "  trainbench emulate --seeds 5 --target 0.86\n"
      "  trainbench emulate --all e4m3 --errors e5m2 --seeds 3 --store tta.db\n"
      "  trainbench emulate --all e4m3 --errors e5m2 --loss-scale dynamic --seeds 3\n"
      "  trainbench emulate --weights fp8_152 --errors fp8_152 --weight-grads fp8_152 \\\n"
      "      --master fp16_169 --optimizer-state fp16_169 --loss-scale static:1024\n"
      "  trainbench emulate --model cnn --activation tanh-pwl --target 0.8 --seeds 2\n"
      "  trainbench emulate --model fc:layers=2,nodes=512,input=784,output=10 --all bf16 \\\n"
      "      --lr 0.02 --seeds 3 --store tta.db\n"
      "  trainbench emulate --model fc:layers=2,nodes=512,input=784,output=10 \\\n"
      "      --numerics 'e4m3+e:e5m2+w.0:bf16+a.0:bf16+ls:dynamic'   # first layer in bf16\n"
      "  trainbench emulate --numerics 'w:e4m3@delayed+a:e4m3@delayed+e:e5m2@delayed' --seeds 5 "
      "\\\n"
      "      --store tta.db   # Transformer Engine's DelayedScaling (HYBRID)\n"
      "  trainbench emulate --numerics 'w:e4m3@delayed+a:e4m3@delayed' --count-every 1 --json \\\n"
      "      --seeds 1   # each step's amax, scales and overflows per point\n"
      "  trainbench emulate --model fc:layers=2,nodes=256,input=784,output=10 \\\n"
      "      --numerics 'w:nvfp4_2d+a:nvfp4+e:nvfp4/stochastic+rht:16'\n"
      "  trainbench emulate --unit mad:mul=e5m2,acc=fp16,width=4,order=lanes --eval-examples 2000\n"
      "  trainbench emulate --dataset gcide --seeds 3 --store lm.db   # the language task, fp32\n"
      "  trainbench emulate --dataset gcide --numerics 'w:e4m3@current+a:e4m3@current+"
      "e:e5m2@current' \\\n"
      "      --seeds 3 --store lm.db\n"
      "  trainbench emulate --dataset gcide --model "
      "gpt:layers=2,d_model=128,heads=4,kv_heads=4,ff=512,seq=64,vocab=256 \\\n"
      "      --target-loss 0.1 --max-iters 6000 --eval-every 100 --seeds 1   # its fp32 curve");
  return {
      sub, [a, sub]() {
        // The emulated formats define their own subnormals; the runtime's flush-to-zero would
        // silently change LibTorch's arithmetic on them.
        at::globalContext().setFlushDenormal(false);
        emu::Policy p;
        const auto point = [&](const std::string& given, uint64_t salt, const char* option) {
          const bool all = given == "off" && !a->all.empty();
          emu::QuantPoint q =
              emu::QuantPoint::parse(all ? a->all : given, a->quant_seed * 8 + salt);
          q.set_item(std::string(all ? "--all" : option) + " " + (all ? a->all : given));
          return q;
        };
        p.weights = point(a->weights, 0, "--weights");
        p.activations = point(a->activations, 1, "--activations");
        p.errors = point(a->errors, 2, "--errors");
        p.weight_grads = point(a->weight_grads, 3, "--weight-grads");
        p.optimizer_state = point(a->state, 4, "--optimizer-state");
        p.master = point(a->master, 5, "--master");
        p.loss_scale = a->loss_scale;
        if (!a->numerics.empty()) {
          for (const auto* o : {"--all", "--weights", "--activations", "--errors", "--weight-grads",
                                "--optimizer-state", "--master", "--loss-scale"})
            if (sub->count(o))
              throw UsageError(std::string("--numerics and ") + o + " both set the points");
          const num::NumericsPolicy text = num::parse_numerics(a->numerics);
          if (sub->count("--activation") && text.activation != "relu")
            throw UsageError("--numerics (act:) and --activation both set the activation");
          if (sub->count("--unit") && !text.unit.empty())
            throw UsageError("--numerics (unit:) and --unit both set the unit");
          p = emu::policy_from(text, a->quant_seed);
        }
        if (a->numerics.empty() || sub->count("--activation")) p.set_activation(a->activation);
        if (a->numerics.empty() || sub->count("--unit")) p.set_unit(a->unit);
        if (emu::is_text_corpus(a->o.dataset) && !sub->count("--model"))
          a->o.model = emu::kLanguageModel;
        // 0 stands for "the default" inside EmulationOptions; given here, it is a bad value.
        if (sub->count("--lr") && a->o.lr == 0)
          throw UsageError("--lr 0: a learning rate above 0 (leave it out for the default)");
        if (sub->count("--eval-examples") && a->o.eval_examples == 0)
          throw UsageError(
              "--eval-examples 0: at least 1 (leave it out for the default: every test image, "
              "or the language task's held-out windows)");
        if (emu::is_text_corpus(a->o.dataset) && sub->count("--target"))
          throw UsageError(
              fmt::format("--target {}: the language task's target is a validation "
                          "loss (--target-loss), not an accuracy",
                          a->o.target));
        const char* metric =
            emu::is_text_corpus(a->o.dataset) ? "validation loss" : "test accuracy";
        const auto progress = [&](const emu::SeedRun& r, int64_t it, double value) {
          if (!a->quiet)
            std::cerr << fmt::format("seed {} iteration {}: {} {:.4f}\n", r.seed, it, metric,
                                     value);
        };
        // A store that cannot be written is refused before minutes of seeds, not after them: an
        // existing one is opened (and checked) now, a new one's directory checked now and the
        // file created once there is something to store, so a refused run leaves none.
        std::unique_ptr<Store> store;
        check_output_file("--store", a->store);
        if (!a->store.empty() && std::filesystem::exists(a->store)) store = Store::open(a->store);
        apply_threads(a->o.threads);
        const auto r = emu::emulate(a->o, p, progress);
        const auto& s = r.summary;
        if (!a->store.empty() && !store) store = Store::open(a->store);
        if (store) {
          store->add_emulation(variant_descriptor(r.options, p), seeds_json(r),
                               host_platform_id(*store), store->stack_id(stack_identity()));
          if (!a->quiet) std::cerr << "emulate: stored in " << printable(a->store) << "\n";
        }
        // A seed that missed the target is exit status 1 in either output (docs/numerics.md).
        if (a->json)
          std::cout << document("trainbench.emulate", emulation_fields(r)).dump(2) << "\n";
        else
          std::cout << format_emulation(r);
        return s.reached == s.runs ? 0 : 1;
      }};
}

}  // namespace tb::cli
