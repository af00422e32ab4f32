#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "base/errors.h"
#include "cli/commands.h"
#include "platform/blas.h"
#include "platform/host.h"
#include "record/context.h"
#include "runner/stack_runtime.h"
#include "runner/threads.h"
#include "spec/printable.h"

namespace {
// `status`, unless what the command printed did not all reach standard output: a full disk or
// a device that refuses writes (`export store.db > /full/x.csv`). The table or JSON there is cut
// short, and exit 0 would pass it for a result: the one line and exit 3 of any refused write.
int output_written(int status) {
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && !std::cout.fail()) return status;
  std::cerr << "trainbench: cannot write standard output"
            << (errno ? std::string(" (") + std::strerror(errno) + ")" : std::string())
            << ": what it holds is incomplete\n";
  return 3;
}
}  // namespace

int main(int argc, char** argv) {
  tb::ensure_runtime_environment(argc, argv);
  CLI::App app{"trainbench: how fast deep-learning training runs on this platform, and why"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tb::trainbench_version_string());
  app.footer(
      "Examples:\n"
      "  trainbench run fc:layers=4,nodes=1024,input=2000,output=200,batch=512,dtype=fp32\n"
      "  trainbench run --family cnn --block residual --filters 16 --image 64 --batch 8 --json\n"
      "  trainbench cost rnn:cell=lstm,embed=500,length=50,vocab=1024,batch=64\n"
      "  trainbench families\n"
      "  trainbench platform --list\n"
      "  trainbench sweep demo --store demo.db\n"
      "  trainbench suite --batch-sweep --store suite.db\n"
      "  trainbench export demo.db --format csv -o runs.csv\n"
      "  trainbench profile fc:layers=4,nodes=1024,batch=512 --trace fc.trace.json\n"
      "  trainbench memory --batch 32,64,128,256 --budget 8GiB cnn:blocks=1,filters=16,image=64\n"
      "  trainbench quantize --format e4m3 3.3 448 500\n"
      "  trainbench simulate fc:layers=4,nodes=1024,batch=512 --platform tpu-v2-board");
  const std::vector<tb::cli::Command> commands = {
      tb::cli::add_run(app),      tb::cli::add_cost(app),    tb::cli::add_families(app),
      tb::cli::add_platform(app), tb::cli::add_sweep(app),   tb::cli::add_merge(app),
      tb::cli::add_export(app),   tb::cli::add_profile(app), tb::cli::add_memory(app),
      tb::cli::add_analyze(app),  tb::cli::add_compare(app), tb::cli::add_report(app),
      tb::cli::add_quantize(app), tb::cli::add_formats(app), tb::cli::add_emulate(app),
      tb::cli::add_simulate(app), tb::cli::add_tta(app),     tb::cli::add_suite(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 says only "A subcommand is required" for a mistyped command: name it.
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-') {
      std::string names;
      for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.sub->get_name();
      std::cerr << "trainbench: unknown command '" << tb::printable(argv[1])
                << "' (commands: " << names << ")\n";
    } else {
      // A negative number after a value is taken for an option, and CLI11 says only that it
      // was not expected.
      std::string hint;
      if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        const std::string what = e.what();
        const auto colon = what.find(": -");
        if (colon != std::string::npos && what.size() > colon + 3 &&
            (std::isdigit(static_cast<unsigned char>(what[colon + 3])) || what[colon + 3] == '.'))
          hint = " (a negative value: put `--` before the first value, e.g. -- 448 -450)";
      }
      std::cerr << "trainbench: " << tb::printable(e.what()) << hint << "\n";
    }
    return 2;
  }
  tb::prepare_runtime();
  const tb::BlasInfo blas = tb::detect_blas();
  std::string warning = tb::slow_blas_warning(blas);
  // A threaded BLAS named by a stack is an experiment's axis, not an accident. The intra-op
  // pool is not sized yet here: configs default to every online core.
  if (warning.empty() && tb::entered_blas() != blas.label())
    warning = tb::threaded_blas_warning(blas, tb::online_cpus());
  if (!warning.empty()) std::cerr << warning << "\n";
  if (const std::string narrow = tb::narrow_kernels_warning(); !narrow.empty())
    std::cerr << narrow << "\n";
  try {
    for (const auto& c : commands)
      if (c.sub->parsed()) return output_written(c.action());
  } catch (const tb::UsageError& e) {
    std::cerr << "trainbench: " << tb::printable(e.what()) << "\n";
    return 2;
  } catch (const tb::StorageError& e) {
    std::cerr << "trainbench: " << tb::printable(e.what()) << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "trainbench: internal error: " << tb::printable(e.what()) << "\n";
    return 3;
  }
  return 2;
}
