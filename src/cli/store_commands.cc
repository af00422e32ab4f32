#include <fmt/format.h>

#include <iostream>

#include "base/errors.h"
#include "base/files.h"
#include "cli/commands.h"
#include "spec/printable.h"
#include "store/export.h"
#include "store/store.h"

namespace tb::cli {

Command add_merge(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string output;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("merge", "Combine results stores without duplicates");
  sub->add_option("stores", a->inputs, "stores to merge")->required();
  sub->add_option("-o,--out", a->output, "the merged store (created or extended)")->required();
  sub->footer(
      "Examples:\n"
      "  trainbench merge shard1.db shard2.db shard3.db -o all.db\n"
      "A run present in several stores (same config, platform and software stack) is kept once:\n"
      "a success over a failure, else the one that finished later, whatever the stores' order.");
  return {sub, [a]() {
            std::vector<std::unique_ptr<Store>> inputs;  // all checked before anything is written
            for (const auto& p : a->inputs) inputs.push_back(Store::open_read_only(p));
            auto out = Store::open(a->output);
            Store::MergeCounts n;
            for (auto& in : inputs) {
              const Store::MergeCounts m = out->merge_from(*in);
              n.added += m.added, n.replaced += m.replaced, n.kept += m.kept;
            }
            std::cout << fmt::format("merged {} new runs into {} ({} runs)", n.added,
                                     printable(a->output), out->count_runs());
            if (n.replaced || n.kept)
              std::cout << fmt::format(
                  "; of runs present twice, {} replaced by the later or successful one, {} "
                  "dropped for one already there",
                  n.replaced, n.kept);
            std::cout << "\n";
            return 0;
          }};
}

Command add_export(CLI::App& app) {
  struct Args {
    std::string store, format = "csv", output;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("export", "Write a store's runs as a flat table");
  sub->add_option("store", a->store, "results store")->required();
  sub->add_option("--format", a->format,
                  "csv or json (parquet needs Apache Arrow, which Debian does not package: "
                  "refused in this build)")
      ->check(CLI::IsMember({"csv", "json", "parquet"}))
      ->capture_default_str();
  sub->add_option("-o,--out", a->output, "file to write (default: standard output)");
  sub->footer(
      "Examples:\n"
      "  trainbench export results.db --format csv -o runs.csv     # pd.read_csv('runs.csv')\n"
      "  trainbench export results.db --format json -o runs.json   # pd.read_json('runs.json')");
  return {sub, [a]() {
            if (a->format == "parquet")
              throw UsageError(
                  "export: parquet is not available in this build (no Apache Arrow "
                  "in Debian's packages); use --format csv or json");
            auto store = Store::open_read_only(a->store);
            const std::string text = a->format == "csv" ? export_csv(*store) : export_json(*store);
            if (a->output.empty())
              std::cout << text;
            else
              write_file_atomically(a->output, text);
            return 0;
          }};
}

}  // namespace tb::cli
