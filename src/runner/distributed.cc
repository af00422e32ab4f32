#include "runner/distributed.h"

#include "platform/host.h"
#include "runner/failure.h"
#include "runner/memory.h"

// ProcessGroupGloo.hpp compiles to nothing unless USE_C10D_GLOO is defined, which
// TorchConfig.cmake does for Debian's LibTorch (libtorch_cpu.so holds the symbols,
// libgloo-dev the headers).
#ifndef USE_C10D_GLOO
#error "this LibTorch was not built with Gloo (USE_C10D_GLOO): data-parallel runs need it"
#endif

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <iostream>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "base/errors.h"
#include "model/phase.h"
#include "model/workload.h"
#include "platform/blas.h"
#include "runner/cpu_usage.h"
#include "runner/threads.h"

namespace tb {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

const char* env_var(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, const char* value, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < lo || v > hi)
    throw UsageError(fmt::format("{}={}: expected an integer in [{}, {}]", name, value, lo, hi));
  return int(v);
}

// Sums gradients across ranks DDP-style: parameters are grouped, in reverse order of
// registration (roughly the order backward produces their gradients), into flat
// buckets; a hook on each parameter copies its gradient into its bucket as soon as
// autograd computes it, and a full bucket is all-reduced asynchronously while backward
// goes on. Buckets are launched strictly in index order, as every rank must issue
// collectives in the same order.
class GradientReducer {
 public:
  GradientReducer(c10::intrusive_ptr<c10d::ProcessGroup> pg, std::vector<torch::Tensor> params,
                  int64_t bucket_bytes)
      : pg_(std::move(pg)),
        params_(std::move(params)),
        slots_(params_.size()),
        seen_(params_.size(), false) {
    for (size_t k = params_.size(); k-- > 0;) {
      const torch::Tensor& p = params_[k];
      // Gloo in this LibTorch has no bfloat16 sum: such gradients travel as fp32.
      const auto type = p.scalar_type() == torch::kBFloat16 ? torch::kFloat : p.scalar_type();
      const int64_t bytes = p.numel() * int64_t(c10::elementSize(type));
      if (buckets_.empty() || buckets_.back().bytes + bytes > bucket_bytes ||
          buckets_.back().type != type)
        buckets_.emplace_back().type = type;
      Bucket& b = buckets_.back();
      slots_[k] = {buckets_.size() - 1, b.numel, p.numel()};
      b.params.push_back(k);
      b.numel += p.numel();
      b.bytes += bytes;
    }
    for (auto& b : buckets_) {
      b.flat = torch::zeros({b.numel}, torch::TensorOptions().dtype(b.type));
      bytes_per_step_ += b.bytes;
    }
    for (size_t k = 0; k < params_.size(); ++k)
      params_[k].register_hook([this, k](const torch::Tensor& grad) { on_gradient(k, grad); });
  }

  void start_step() {
    for (auto& p : params_) p.mutable_grad().reset();
    std::fill(seen_.begin(), seen_.end(), false);
    for (auto& b : buckets_) {
      b.pending = int64_t(b.params.size());
      b.work.reset();
      b.done_ns = -1;
    }
    next_ = 0;
  }

  // After backward: launches what is left, waits for every bucket, and puts the
  // averaged gradients where the optimizer reads them.
  void finish() {
    const auto backward_end = Clock::now();
    while (next_ < buckets_.size()) {
      Bucket& b = buckets_[next_];
      for (size_t k : b.params)  // a parameter that took no part in this step's loss
        if (!seen_[k]) b.flat.narrow(0, slots_[k].offset, slots_[k].numel).zero_();
      launch(next_++);
    }
    for (auto& b : buckets_) b.work->wait();
    const auto done = Clock::now();
    exposed_s_ = seconds(backward_end, done);
    // Time some all-reduce was in flight: the union of the buckets' intervals.
    std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
    for (auto& b : buckets_) {
      const int64_t ns = b.done_ns.load();
      spans.emplace_back(b.launched,
                         ns < 0 ? done : Clock::time_point(std::chrono::nanoseconds(ns)));
    }
    std::sort(spans.begin(), spans.end());
    busy_s_ = 0;
    Clock::time_point reach = spans.empty() ? done : spans.front().first;
    for (const auto& [s, e] : spans) {
      const auto from = std::max(s, reach);
      if (e > from) busy_s_ += seconds(from, e), reach = e;
    }
    const double world = pg_->getSize();
    for (auto& b : buckets_) b.flat.div_(world);
    for (size_t k = 0; k < params_.size(); ++k) {
      const Slot& s = slots_[k];
      torch::Tensor g =
          buckets_[s.bucket].flat.narrow(0, s.offset, s.numel).view(params_[k].sizes());
      params_[k].mutable_grad() =
          g.scalar_type() == params_[k].scalar_type() ? g : g.to(params_[k].scalar_type());
    }
  }

  double exposed_s() const { return exposed_s_; }  // after backward, waiting for the network
  double busy_s() const { return busy_s_; }        // some all-reduce in flight, overlapped or not
  int64_t bytes_per_step() const { return bytes_per_step_; }
  size_t buckets() const { return buckets_.size(); }

 private:
  struct Slot {
    size_t bucket = 0;
    int64_t offset = 0, numel = 0;
  };
  struct Bucket {
    torch::ScalarType type = torch::kFloat;
    std::vector<size_t> params;
    int64_t numel = 0, bytes = 0, pending = 0;
    torch::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
    Clock::time_point launched;
    std::atomic<int64_t> done_ns{-1};  // written by Gloo's thread
    Bucket() = default;
    Bucket(Bucket&&) = delete;  // the completion callback holds its address
  };

  void on_gradient(size_t k, const torch::Tensor& grad) {
    const Slot& s = slots_[k];
    Bucket& b = buckets_[s.bucket];
    b.flat.narrow(0, s.offset, s.numel).copy_(grad.reshape(-1));
    if (!seen_[k]) {
      seen_[k] = true;
      --b.pending;
    }
    while (next_ < buckets_.size() && buckets_[next_].pending == 0) launch(next_++);
  }

  void launch(size_t i) {
    Bucket& b = buckets_[i];
    std::vector<at::Tensor> tensors{b.flat};
    b.launched = Clock::now();
    b.work = pg_->allreduce(tensors);
    b.work->getFuture()->addCallback([&b](c10::ivalue::Future&) {
      b.done_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
    });
  }

  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  std::vector<torch::Tensor> params_;
  std::vector<Slot> slots_;
  std::vector<bool> seen_;
  std::deque<Bucket> buckets_;  // stable addresses
  size_t next_ = 0;
  int64_t bytes_per_step_ = 0;
  double exposed_s_ = 0, busy_s_ = 0;
};

struct Job {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
};

Job join(const DistEnv& env, const DistOptions& dist) {
  const auto timeout = std::chrono::milliseconds(int64_t(dist.timeout_s * 1000));
  c10d::TCPStoreOptions so;
  so.port = uint16_t(env.master_port);
  so.isServer = env.rank == 0 && !env.store_hosted;
  so.numWorkers = env.world;
  so.waitWorkers = false;  // Gloo's rendezvous below waits, with the same timeout
  so.timeout = timeout;
  Job job;
  job.store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = env_var("GLOO_SOCKET_IFNAME"))
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (env.local || env.master_addr == "127.0.0.1" || env.master_addr == "localhost")
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  opts->threads = 2;
  job.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(job.store, env.rank, env.world, opts);
  return job;
}

void wait_all(c10d::Work& w) { w.wait(); }

}  // namespace

std::optional<DistEnv> dist_env_from_environment() {
  const char *rank_name = "RANK", *world_name = "WORLD_SIZE";
  const char* rank = env_var("RANK");
  // Slurm sets SLURM_PROCID in every job step, batch scripts included: it names a rank
  // only where the user also said where rank 0 is.
  if (!rank && env_var("SLURM_PROCID") && env_var("MASTER_ADDR"))
    rank_name = "SLURM_PROCID", world_name = "SLURM_NTASKS", rank = env_var("SLURM_PROCID");
  if (!rank) return std::nullopt;
  const char* world = env_var(world_name);
  if (!world)
    throw UsageError(fmt::format("{}={} is set but {} is not", rank_name, rank, world_name));
  DistEnv e;
  e.world = env_int(world_name, world, 1, 65536);
  e.rank = env_int(rank_name, rank, 0, e.world - 1);
  const char* addr = env_var("MASTER_ADDR");
  const char* port = env_var("MASTER_PORT");
  if (!addr || !port)
    throw UsageError(
        fmt::format("{}={}: MASTER_ADDR and MASTER_PORT must be set too (where rank 0 listens)",
                    rank_name, rank));
  e.master_addr = addr;
  e.master_port = env_int("MASTER_PORT", port, 1, 65535);
  e.store_hosted = env_var("TB_STORE_HOSTED") != nullptr;
  e.local = env_var("TB_LOCAL_WORKERS") != nullptr;
  return e;
}

// ZeRO stage 1 (Rajbhandari et al. 2020): the optimizer's state is sharded over the ranks.
// The parameters become views into one flat buffer padded to `world` equal shards; each rank's
// optimizer holds its shard only (a leaf sharing the buffer's storage), so the update writes
// the weights in place. A step: gradients all-reduced as in plain data parallelism (Gloo in
// LibTorch 1.13 has no reduce_scatter), each rank updates its shard, then the shards are
// all-gathered in the list form (no _allgather_base either).
class Zero1 {
 public:
  Zero1(c10d::ProcessGroup& pg, int rank, int world, const std::vector<torch::Tensor>& params)
      : pg_(pg), rank_(rank), world_(world), params_(params) {
    int64_t total = 0;
    for (const auto& p : params_) total += p.numel();
    shard_size_ = (total + world - 1) / world;
    flat_ = torch::zeros({shard_size_ * world}, params_.front().options());
    int64_t at = 0;
    for (auto& p : params_) {
      flat_.narrow(0, at, p.numel()).copy_(p.detach().reshape({-1}));
      p.set_data(flat_.narrow(0, at, p.numel()).view(p.sizes()));
      offsets_.push_back(at);
      at += p.numel();
    }
    shard_ =
        flat_.narrow(0, int64_t(rank) * shard_size_, shard_size_).detach().requires_grad_(true);
  }
  torch::Tensor shard() const { return shard_; }

  void step(torch::optim::Optimizer& opt) {
    // This rank's slice of the averaged gradient, from the parameters it overlaps.
    const int64_t lo = int64_t(rank_) * shard_size_, hi = lo + shard_size_;
    torch::Tensor grad = torch::zeros({shard_size_}, flat_.options());
    for (size_t i = 0; i < params_.size(); ++i) {
      const int64_t a = std::max(lo, offsets_[i]),
                    b = std::min(hi, offsets_[i] + params_[i].numel());
      if (a >= b || !params_[i].grad().defined()) continue;
      grad.narrow(0, a - lo, b - a)
          .copy_(params_[i].grad().reshape({-1}).narrow(0, a - offsets_[i], b - a));
    }
    shard_.mutable_grad() = grad;
    opt.step();
    std::vector<torch::Tensor> in{shard_.detach().clone()};
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int r = 0; r < world_; ++r)
      out[0].push_back(flat_.narrow(0, int64_t(r) * shard_size_, shard_size_));
    wait_all(*pg_.allgather(out, in));
  }
  double allgather_bytes_per_step() const {
    return double(shard_size_) * double(world_ - 1) * double(flat_.element_size());
  }

 private:
  c10d::ProcessGroup& pg_;
  int rank_, world_;
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;
  int64_t shard_size_ = 0;
  torch::Tensor flat_, shard_;
};

// Bytes of the state an optimizer holds now (runner/memory.h's categories).
double optimizer_state_bytes(torch::optim::Optimizer& opt) {
  double bytes = 0;
  for (const auto& t : optimizer_state(opt)) bytes += double(t.numel()) * double(t.element_size());
  return bytes;
}

RunResult run_distributed(const Config& input, const RunOptions& options, const DistEnv& env,
                          const DistOptions& dist) {
  Config config = input;
  if (config.get_int("workers") != env.world)
    throw UsageError(fmt::format("{}: workers={} but the job has {} ranks (WORLD_SIZE)",
                                 config.family(), config.get("workers"), env.world));
  RunResult r;
  r.family = config.family();
  r.throughput_unit = config.schema().throughput_unit;
  r.started_at = utc_now_iso();
  r.threads = apply_threads(int(config.get_int("threads")));
  r.blas_threads = detect_blas().threads;
  config.set("threads", std::to_string(r.threads));
  r.config = config.str();
  r.device = config.get("device");
  if (has_cost(config.family())) r.cost = step_cost(config);
  r.peak_flops = options.peak_flops;
  if (!r.peak_flops && options.platform)
    r.peak_flops = options.platform->peak_flops(config.get("dtype"));
  auto done = [&](Status s, const std::string& why) {
    r.status = s;
    r.error = why;
    r.finished_at = utc_now_iso();
    return r;
  };
  if (r.device != "cpu")
    return done(Status::kUnsupported, "workers > 1 runs on cpu only (Gloo); NCCL is not wired up");
  if (config.get("numerics") != "fp32")
    return done(Status::kUnsupported, "numerics=" + config.get("numerics") +
                                          " with workers > 1: the data-parallel "
                                          "step does not apply emulated formats");
  if (config.schema().find("zero") && config.get_int("zero") >= 2)
    return done(Status::kUnsupported,
                "zero=" + config.get("zero") +
                    ": ZeRO stages 2 and 3 are predicted (trainbench memory, cost), not run; "
                    "stage 1 runs");
  if (auto refused = refuse_before_running(config, options)) {
    refused->config = r.config;
    refused->threads = r.threads;
    return *refused;
  }

  // A process group whose peer died may block in its destructor: on failure it is
  // deliberately leaked, and the process exits soon after anyway.
  Job job;
  try {
    job = join(env, dist);
  } catch (const std::exception& e) {
    new Job(job);
    return done(Status::kCrashed,
                fmt::format("rank {}: the job of {} workers did not assemble at {}:{} within {} s "
                            "(a worker never joined or died starting): {}",
                            env.rank, env.world, env.master_addr, env.master_port, dist.timeout_s,
                            first_line(e.what())));
  }
  auto& pg = *job.pg;
  // Under an outside launcher this is the only sign of life before the result.
  if (!env.local)
    std::cerr << fmt::format("trainbench: rank {} of {} joined at {}:{}\n", env.rank, env.world,
                             env.master_addr, env.master_port);

  int64_t step = 0;
  try {
    torch::manual_seed(options.seed);
    auto workload = build_workload(config);
    const torch::Dtype dtype = dtype_of(config);
    workload->module().to(torch::kCPU, dtype);
    workload->module().train();
    // The same starting weights everywhere, as DDP does.
    for (auto t : workload->module().parameters()) {
      std::vector<at::Tensor> v{t.data()};
      pg.broadcast(v)->wait();
    }
    for (auto t : workload->module().buffers()) {
      std::vector<at::Tensor> v{t};
      pg.broadcast(v)->wait();
    }
    // Each worker its own examples: data parallelism.
    const Batch batch =
        workload->make_batch(torch::kCPU, dtype, options.seed + 7919 * uint64_t(env.rank));
    // ZeRO-1 shards the optimizer over the ranks; its flat buffer must exist before the
    // gradient hooks are placed and the optimizer made.
    const int64_t zero = config.schema().find("zero") ? config.get_int("zero") : 0;
    std::unique_ptr<Zero1> zero1;
    if (zero == 1)
      zero1 = std::make_unique<Zero1>(pg, env.rank, env.world, workload->module().parameters());
    auto opt = zero1 ? make_optimizer(config, std::vector<torch::Tensor>{zero1->shard()})
                     : make_optimizer(config, workload->module());
    GradientReducer reducer(job.pg, workload->module().parameters(),
                            int64_t(dist.bucket_mib * (1 << 20)));
    r.examples_per_step = workload->examples_per_step() * env.world;
    r.units_per_step = workload->units_per_step() * env.world;

    SteadyStateMonitor monitor(options.timing);
    std::vector<double> times, exposed, busy;
    torch::Tensor control = torch::zeros({2});
    int64_t warmup = 0;
    const CpuSnapshot cpu_begin = cpu_snapshot();
    const auto loop_start = Clock::now();
    for (;; ++step) {
      const auto t0 = Clock::now();
      reducer.start_step();
      torch::Tensor loss;
      {
        PhaseScope phase(Phase::kForward);
        loss = workload->loss(batch);
      }
      {
        PhaseScope phase(Phase::kBackward);
        loss.backward();
        reducer.finish();
      }
      {
        PhaseScope phase(Phase::kOptimizer);
        if (zero1)
          zero1->step(*opt);
        else
          opt->step();
      }
      const auto t1 = Clock::now();
      times.push_back(seconds(t0, t1));
      exposed.push_back(reducer.exposed_s());
      busy.push_back(reducer.busy_s());
      // Rank 0 decides when the step time is known; the others follow, so every rank
      // runs the same number of steps. Outside the timed step.
      control.zero_();
      if (env.rank == 0 && monitor.add(times.back(), seconds(loop_start, t1))) {
        control[0] = 1;
        control[1] = double(monitor.result().warmup);
      }
      std::vector<at::Tensor> v{control};
      wait_all(*pg.broadcast(v));
      if (control[0].item<double>() > 0) {
        warmup = int64_t(control[1].item<double>());
        break;
      }
    }
    r.cpu = cpu_usage(cpu_begin, cpu_snapshot());
    r.steps =
        env.rank == 0 ? monitor.result() : summarize(times, warmup, options.timing.confidence);
    if (env.rank != 0) r.steps.end_reason = "rank-0";
    r.step_times = times;

    auto mean_after = [&](const std::vector<double>& x) {
      double s = 0;
      int64_t n = 0;
      for (size_t i = size_t(warmup); i < x.size(); ++i) s += x[i], ++n;
      return n ? s / double(n) : 0.0;
    };
    // Every rank's figures, gathered by a sum of rows each rank fills its own of.
    enum { kStep, kRate, kExposed, kBusy, kCpu, kFields };
    torch::Tensor table = torch::zeros({env.world, kFields}, torch::kDouble);
    const double per_rate = r.steps.mean > 0 ? workload->examples_per_step() / r.steps.mean : 0;
    table[env.rank][kStep] = r.steps.mean;
    table[env.rank][kRate] = per_rate;
    table[env.rank][kExposed] = mean_after(exposed);
    table[env.rank][kBusy] = mean_after(busy);
    table[env.rank][kCpu] = r.cpu.process;
    std::vector<at::Tensor> v{table};
    wait_all(*pg.allreduce(v));

    nlohmann::json per = nlohmann::json::array();
    double aggregate = 0, exposed_sum = 0, busy_sum = 0, step_sum = 0;
    for (int k = 0; k < env.world; ++k) {
      const auto row = table[k];
      const double st = row[kStep].item<double>(), rate = row[kRate].item<double>();
      const double ex = row[kExposed].item<double>(), bu = row[kBusy].item<double>();
      per.push_back({{"rank", k},
                     {"step_mean_s", st},
                     {"examples_per_s", rate},
                     {"exposed_comm_s", ex},
                     {"allreduce_busy_s", bu},
                     {"cpu_utilization_process", row[kCpu].item<double>()}});
      aggregate += rate, exposed_sum += ex, busy_sum += bu, step_sum += st;
    }
    const double n = env.world;
    const double comm_share = step_sum > 0 ? exposed_sum / step_sum : 0;
    r.distributed = {
        {"workers", env.world},
        {"rank", env.rank},
        {"backend", "gloo"},
        {"launch", env.local ? "local" : "external"},
        {"master", fmt::format("{}:{}", env.master_addr, env.master_port)},
        {"per_worker_batch", workload->examples_per_step()},
        {"examples_per_s", aggregate},
        {"per_worker_examples_per_s", aggregate / n},
        {"per_worker", per},
        {"exposed_comm_s", exposed_sum / n},
        {"allreduce_busy_s", busy_sum / n},
        {"compute_s", (step_sum - exposed_sum) / n},
        {"comm_share", comm_share},
        {"compute_share", 1 - comm_share},
        {"overlapped_share", busy_sum > 0 ? std::max(0.0, 1 - exposed_sum / busy_sum) : 0},
        {"allreduce_bytes_per_step", reducer.bytes_per_step()},
        {"buckets", reducer.buckets()},
        {"bucket_mib", dist.bucket_mib},
        {"timeout_s", dist.timeout_s},
        {"zero", zero},
        // Measured: what this rank's optimizer holds after the last step.
        {"optimizer_state_bytes", optimizer_state_bytes(*opt)},
        {"allgather_bytes_per_step", zero1 ? zero1->allgather_bytes_per_step() : 0.0},
    };
    {
      // Where the weights ended, so runs can be compared (ZeRO-1 against plain data
      // parallelism): their sum and sum of squares in double.
      double sum = 0, squares = 0;
      for (const auto& p : workload->module().parameters()) {
        const auto d = p.detach().to(torch::kDouble);
        sum += d.sum().item<double>();
        squares += d.pow(2).sum().item<double>();
      }
      r.distributed["weights_sum"] = sum;
      r.distributed["weights_sum_of_squares"] = squares;
    }
    if (env.rank == 0) {
      r.examples_per_s = aggregate;
      r.units_per_s = aggregate * workload->units_per_step() / workload->examples_per_step();
    }
  } catch (...) {
    new Job(job);
    // The status from the one mapping every path shares (a UsageError is rethrown); the
    // reason says which rank and step, and what a crash here usually means.
    const Failure f = current_failure("during the step");
    if (f.status != Status::kCrashed)
      return done(f.status, fmt::format("rank {}: step {}: {}", env.rank, step, f.error));
    bool communication = false;  // LibTorch's and Gloo's errors: a peer dropped or timed out
    try {
      throw;
    } catch (const c10::Error&) {
      communication = true;
    } catch (const ::gloo::Exception&) {
      communication = true;
    } catch (...) {
    }
    return done(Status::kCrashed,
                fmt::format("rank {}: {}failed at step {} (a worker died, stalled or timed out "
                            "after {} s): {}",
                            env.rank, communication ? "communication " : "", step, dist.timeout_s,
                            f.error));
  }

  if (r.steps.mean > 0) {
    // FLOPs of every worker's step; the platform's peak is this machine's, so the
    // utilization means something only when every worker runs here.
    r.achieved_flops = r.cost.flops() * env.world / r.steps.mean;
    if (env.local && r.peak_flops && *r.peak_flops > 0)
      r.flops_utilization = r.achieved_flops / *r.peak_flops;
  }
  return done(Status::kOk, "");
}

}  // namespace tb
