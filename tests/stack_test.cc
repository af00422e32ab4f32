// The software stack as an experiment axis: stack strings, TorchScript mode computing the
// eager loss, and BLAS libraries chosen per process and detected rather than assumed.
#include "spec/stack.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "model/workload.h"
#include "platform/blas.h"
#include "runner/torchscript.h"
#include "support/cli.h"
#include "support/unset_env.h"

namespace tb {
namespace {

using Output = ::tb::testing::CliOutput;
using ::tb::testing::run;

TEST(Stack, StringsRoundTripAndRefuseBadValues) {
  EXPECT_TRUE(parse_stack("").is_default());
  EXPECT_EQ(parse_stack("stack:").str(), "");
  const StackSpec s =
      parse_stack("stack:mode=torchscript,blas=blis-openmp,onednn=off,blas_threads=2");
  EXPECT_EQ(s.str(), "stack:blas=blis-openmp,blas_threads=2,onednn=off,mode=torchscript");
  EXPECT_EQ(parse_stack(s.str()), s);
  EXPECT_EQ(parse_stack("blas=reference").blas, "reference");
  EXPECT_EQ(s.label(), "blas=blis-openmp,blas_threads=2,onednn=off,mode=torchscript");
  EXPECT_EQ(parse_stack("mode=torchscript").label(), "mode=torchscript");
  EXPECT_EQ(StackSpec{}.label(), "default");
  for (const char* bad :
       {"blas=mkl", "mode=jit", "onednn=maybe", "blas_threads=-1", "colour=red", "blas"})
    EXPECT_THROW(parse_stack(bad), UsageError) << bad;
  try {
    parse_stack("blas=mkl");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("blis-pthread"), std::string::npos)
        << "lists the known ones";
  }
  EXPECT_EQ(stack_packages({parse_stack("blas=blis-pthread"), parse_stack("blas=reference"),
                            parse_stack("blas=blis-pthread")}),
            (std::vector<std::string>{"libblis4-pthread", "libblas3"}));
}

// The same weights and batch give the same loss and gradients eagerly and through the
// traced graph, including after the executor's profiling runs have optimized it.
void expect_same_step(const std::string& config_text) {
  const Config config = parse_config(config_text);
  torch::manual_seed(3);
  auto eager = build_workload(config);
  const Batch batch = eager->make_batch(torch::kCPU, torch::kFloat32, 5);
  const torch::Tensor l0 = eager->loss(batch);
  l0.backward();
  std::vector<torch::Tensor> g0;
  for (auto& p : eager->module().parameters()) {
    g0.push_back(p.grad().clone());
    p.mutable_grad().reset();
  }
  auto traced = trace_workload(std::move(eager), batch);
  for (int it = 0; it < 4; ++it) {
    const torch::Tensor l = traced->loss(batch);
    l.backward();
    EXPECT_NEAR(l.item<double>(), l0.item<double>(), 1e-5 * std::abs(l0.item<double>()))
        << config_text << " run " << it;
    auto params = traced->module().parameters();
    ASSERT_EQ(params.size(), g0.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(params[i].grad().defined())
          << config_text << ": no gradient reached parameter " << i;
      EXPECT_TRUE(torch::allclose(params[i].grad(), g0[i], 1e-4, 1e-6))
          << config_text << " parameter " << i;
      params[i].mutable_grad().reset();
    }
  }
}

TEST(Stack, TorchScriptComputesTheEagerLossAndGradients) {
  expect_same_step("fc:layers=2,nodes=64,input=32,output=10,batch=16");
  expect_same_step("rnn:cell=gru,layers=1,embed=16,length=5,vocab=30,batch=4");
}

TEST(Stack, TorchScriptTracesBatchNormInTraining) {
  expect_same_step("cnn:block=residual,blocks=1,filters=4,image=32,output=10,batch=2");
}

TEST(Stack, ReferenceBlasIsDetectedAndMuchSlowerThanOpenBlas) {
  const std::string config = "fc:layers=1,nodes=1024,input=1024,output=1024,batch=256,threads=2";
  std::map<std::string, double> speed;
  for (const std::string blas : {"openblas-pthread", "reference"}) {
    const Output o = run("run " + config + " --stack blas=" + blas + " --steps 4 --json");
    ASSERT_EQ(o.status, 0) << o.err;
    const auto r = nlohmann::json::parse(o.out).at("results").at(0);
    EXPECT_EQ(r.at("stack"), "stack:blas=" + blas + ",blas_threads=0,onednn=on,mode=eager");
    EXPECT_EQ(r.at("stack_detected").at("blas"), blas);
    EXPECT_TRUE(r.at("stack_mismatch").is_null()) << r.at("stack_mismatch");
    speed[blas] = r.at("metrics").at("examples_per_s").get<double>();
  }
  // About 300 vs 5 GFLOP/s on these machines; 4x leaves room for a busy host.
  EXPECT_GT(speed["openblas-pthread"], 4 * speed["reference"]);
}

TEST(Stack, UnknownOrMissingBlasIsAOneLineError) {
  // The image's OPENBLAS_CORETYPE would add its own warning line to the count.
  const tb::test::Unset core("OPENBLAS_CORETYPE");
  Output o = run("run fc:nodes=8 --stack blas=mkl");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("unknown BLAS 'mkl'"), std::string::npos) << o.err;
  o = run("run fc:nodes=8 stack:blas=blis-serial", "TB_BLAS_ROOT=/nonexistent");
  EXPECT_EQ(o.status, 2);
  // No OpenMP build under that root either: the system's choice runs, and when that is a
  // pthread build (Debian ranks it first) start-up says so in one line of its own.
  char system_blas[4096] = {};
  const bool pthread = realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3", system_blas) &&
                       std::string(system_blas).find("pthread") != std::string::npos;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), pthread ? 2 : 1) << o.err;
  if (pthread) {
    EXPECT_EQ(o.err.rfind("WARNING: the BLAS", 0), 0u) << o.err;
    EXPECT_NE(o.err.find("runs its own thread pool beside LibTorch's"), std::string::npos) << o.err;
  }
  EXPECT_NE(o.err.find("'blis-serial' is not installed"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("libblis4-serial"), std::string::npos) << o.err;
}

TEST(Stack, SweepRunsEveryStackAndCompareMatchesThem) {
  const std::string dir = ::testing::TempDir() + "/tb-stack-sweep-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  {
    std::ofstream f(dir + "/s.toml");
    f << "name = \"s\"\nbudget = 0.3\nrepetitions = 1\nstacks = [\"blas=openblas-pthread\", "
         "\"blas=openblas-pthread,mode=torchscript\"]\n"
         "[[grid]]\nfamily = \"fc\"\nlayers = 1\nnodes = [64, 128]\ninput = 64\noutput = 10\nbatch "
         "= 32\n";
  }
  Output o = run("sweep " + dir + "/s.toml --store " + dir + "/s.db");
  ASSERT_EQ(o.status, 0) << o.err;
  o = run("compare " + dir + "/s.db --by stack --format json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("matched").size(), 2u);
  EXPECT_EQ(j.at("a"), "blas=openblas-pthread");
  EXPECT_EQ(j.at("b"), "blas=openblas-pthread,mode=torchscript");
  o = run("sweep " + dir + "/s.toml --packages");
  EXPECT_EQ(o.out, "libopenblas0-pthread\n");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace tb

namespace tb {
namespace {

// OpenBLAS releases older than the CPU fall back to generic kernels; trainbench then asks
// for the AVX-512 or AVX2 ones (platform/blas.h), and only then.
TEST(Stack, OpenBlasGenericCoreIsReplacedByTheCpusOwn) {
  const std::vector<std::string> avx512 = {"avx512f",  "avx512bw", "avx512dq",
                                           "avx512vl", "avx2",     "fma"};
  const std::string prescott =
      "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Prescott MAX_THREADS=64";
  EXPECT_EQ(openblas_core_override(prescott, avx512), "SkylakeX");
  EXPECT_EQ(openblas_core_override(prescott, {"avx2", "fma"}), "Haswell");
  EXPECT_EQ(openblas_core_override(prescott, {"sse3"}), "");
  // A core OpenBLAS chose for itself is kept, whatever the CPU has.
  EXPECT_EQ(
      openblas_core_override("OpenBLAS 0.3.21 DYNAMIC_ARCH Cooperlake MAX_THREADS=64", avx512), "");
  EXPECT_EQ(
      openblas_core_override("OpenBLAS 0.3.26 DYNAMIC_ARCH SapphireRapids MAX_THREADS=64", avx512),
      "");
  EXPECT_EQ(openblas_core_override("BLIS 0.9.0", avx512), "");
}

// A user's OPENBLAS_CORETYPE is kept; narrower kernels than the CPU's vectors are said in one
// line that names the variable's value (escaped) and the fix.
TEST(Stack, NarrowOpenBlasKernelsAskedForAreSaid) {
  const std::vector<std::string> avx512 = {"avx512f",  "avx512bw", "avx512dq",
                                           "avx512vl", "avx2",     "fma"};
  const std::string haswell = "OpenBLAS 0.3.21 DYNAMIC_ARCH USE_OPENMP Haswell MAX_THREADS=64";
  const std::string w = narrow_kernels_warning(haswell, avx512, "Haswell");
  EXPECT_NE(w.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << w;
  EXPECT_NE(w.find("AVX2"), std::string::npos) << w;
  EXPECT_NE(w.find("AVX-512"), std::string::npos) << w;
  EXPECT_NE(w.find("unset OPENBLAS_CORETYPE"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
  // Control characters in the variable come back escaped.
  EXPECT_EQ(narrow_kernels_warning(haswell, avx512, "Has\x1bwell").find('\x1b'), std::string::npos);
  // Unset, or set to what the CPU has, or an AVX2 CPU on AVX2 kernels: nothing to say.
  EXPECT_EQ(narrow_kernels_warning(haswell, avx512, nullptr), "");
  EXPECT_EQ(narrow_kernels_warning(haswell, avx512, ""), "");
  EXPECT_EQ(narrow_kernels_warning(haswell, {"avx2", "fma"}, "Haswell"), "");
  EXPECT_EQ(narrow_kernels_warning("OpenBLAS 0.3.21 DYNAMIC_ARCH SkylakeX MAX_THREADS=64", avx512,
                                   "SkylakeX"),
            "");
  // Pre-AVX2 kernels on an AVX2 CPU are said too; a core not ranked, or not OpenBLAS, is not.
  EXPECT_NE(narrow_kernels_warning("OpenBLAS 0.3.21 DYNAMIC_ARCH Sandybridge MAX_THREADS=64",
                                   {"avx2", "fma"}, "Sandybridge"),
            "");
  EXPECT_EQ(narrow_kernels_warning("OpenBLAS 0.3.21 DYNAMIC_ARCH NewCore MAX_THREADS=64", avx512,
                                   "NewCore"),
            "");
  EXPECT_EQ(narrow_kernels_warning("BLIS 0.9.0", avx512, "Haswell"), "");
  // A serial build ends its string with SINGLE_THREADED; a build without DYNAMIC_ARCH ignores
  // the variable.
  EXPECT_NE(
      narrow_kernels_warning("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell SINGLE_THREADED",
                             avx512, "Haswell"),
      "");
  EXPECT_EQ(narrow_kernels_warning("OpenBLAS 0.3.21 NO_AFFINITY Haswell MAX_THREADS=64", avx512,
                                   "Haswell"),
            "");
}

// Start-up says it once per command, also where a stack's BLAS re-executes the program, and
// not where trainbench chose the value itself.
TEST(Stack, NarrowKernelsAreSaidOncePerCommand) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl"))
    GTEST_SKIP() << "needs an AVX-512 CPU";
  const std::string cfg = "run fc:layers=1,nodes=8,input=8,output=2,batch=2 --steps 2";
  for (const std::string extra : {"", " --stack blas=openblas-pthread"}) {
    const Output o = run(cfg + extra, "OPENBLAS_CORETYPE=Haswell");
    ASSERT_EQ(o.status, 0) << o.err;
    size_t said = 0;
    for (size_t i = o.err.find("OPENBLAS_CORETYPE=Haswell"); i != std::string::npos;
         i = o.err.find("OPENBLAS_CORETYPE=Haswell", i + 1))
      ++said;
    EXPECT_EQ(said, 1u) << extra << ": " << o.err;
  }
  const Output chosen = run(cfg, "OPENBLAS_CORETYPE=Haswell TB_OPENBLAS_CORETYPE_SET=Haswell");
  EXPECT_EQ(chosen.err.find("OPENBLAS_CORETYPE="), std::string::npos) << chosen.err;
}

TEST(Stack, RunsOnTheCpusOwnOpenBlasKernels) {
  const Output o = run("run fc:layers=1,nodes=16,input=16,output=4,batch=4 --steps 2 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto ctx = nlohmann::json::parse(o.out)["context"];
  const std::string version = ctx["libraries"]["blas"]["version"];
  if (version.rfind("OpenBLAS", 0) != 0) GTEST_SKIP() << version;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_EQ(version.find(" Prescott "), std::string::npos) << version;
#endif
  // What was asked of OpenBLAS, if anything, is in the context.
  EXPECT_TRUE(ctx["runtime"]["environment"].contains("OPENBLAS_CORETYPE")) << ctx.dump();
}

}  // namespace
}  // namespace tb
