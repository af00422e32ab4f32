#pragma once
// The accelerator model against published training throughputs (simulate
// --validate-published): a CSV of single-device measurements from public sources, each
// predicted from its platform's description and compared. The shipped file is
// data/published/training-throughput.csv; its derivation is scripts/published_rows.py.
#include <string>
#include <vector>

#include "analysis/validation.h"

namespace tb::sim {

// One row: columns config, platform, format, batch, throughput, unit, source (and optional
// layout and note), by name in the header line.
struct PublishedRow {
  int line = 0;
  std::string config;    // trainbench config string, the row's batch applied
  std::string platform;  // a platform name (platforms/*.json) or description file
  std::string format;    // a simulate format or recipe: fp32, tf32, amp-fp16, ...
  // Examples per step; for a tokens row (unit tokens/s), tokens per step, which the config's
  // batch x seq must equal.
  int64_t batch = 0;
  double throughput = 0;  // batch units per second
  bool tokens = false;
  std::string unit, source, note;
  std::string layout = "nhwc";  // the run's activation layout (SimOptions::layout); empty: nhwc
};

// Reads and checks every row: the config parses and has a cost description, the platform is
// known and runs the format, batch and throughput are positive, the unit counts examples or
// (for a family that counts tokens, with batch x seq equal to the row's batch) tokens.
// Throws UsageError "FILE:LINE: field 'NAME': why" for the first bad one.
std::vector<PublishedRow> read_published(const std::string& path);

// One validation per platform, in the order the rows name them; points carry the row's
// format and source, measured_s is batch / throughput.
std::vector<Validation> validate_published(const std::vector<PublishedRow>& rows);

// The shipped file (data/published/training-throughput.csv).
std::string shipped_published_path();
// data/measured/training-throughput.csv: the same format, measured on lent GPUs
// (scripts/measure_gpu.py).
std::string shipped_measured_path();

// How far the simulator is from the shipped published and measured rows for a platform, in a
// phrase for beside a prediction: "simulator error on h200-sxm-141gb: median 19%, p90 30% over
// 2 published rows; median 25%, p90 63% over 16 measured rows", or "simulator not validated
// on NAME (no published or measured rows)". With a format: the rows in that format besides
// ("; in amp-fp8-eager@current: median 31%, p90 46% over 6 rows"; a recipe's rows whatever
// its scaling's parameters), or that none is in it ("; no row in amp-fp8@current"): a
// prediction in a format no row checks rests on the others alone.
std::string validation_phrase(const std::string& platform, const std::string& format = "");

// Text: every row (predicted and published throughput, error), then median and p90 per
// platform and over all rows.
std::string format_published(const std::vector<Validation>& v);

}  // namespace tb::sim
