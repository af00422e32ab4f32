#include "cost/layers.h"

#include <algorithm>
#include <stdexcept>

namespace tb::cost {

LayerCost linear(const std::string& name, double rows, int64_t in, int64_t out, int64_t eb,
                 bool input_grad) {
  LayerCost l{name, "linear"};
  const double w = double(in) * out, mac = rows * w;
  l.params = in * out + out;
  l.fwd_matmul_flops = 2 * mac;
  l.fwd_flops = 2 * mac + rows * out;  // + bias add
  l.bwd_input_flops = input_grad ? 2 * mac : 0;
  l.bwd_weight_flops = 2 * mac + rows * out;  // + bias gradient (column sum)
  // forward: read W, b, X; write Y. dX: read W, dY; write dX. dW: read X, dY; write dW, db.
  l.bytes_read =
      eb * ((w + out + rows * in) + (input_grad ? w + rows * out : 0) + (rows * in + rows * out));
  l.bytes_written = eb * (rows * out + (input_grad ? rows * in : 0) + w + out);
  l.output_bytes = eb * rows * out;
  l.gemm_m = int64_t(rows), l.gemm_n = out, l.gemm_k = in, l.gemm_count = 1;
  return l;
}

int64_t Conv2dShape::out_h() const { return (h + 2 * (k / 2) - k) / stride + 1; }
int64_t Conv2dShape::out_w() const { return (w + 2 * (k / 2) - k) / stride + 1; }

LayerCost conv(const std::string& name, const ConvGeometry& g, int64_t eb, bool input_grad,
               bool weight_grad) {
  LayerCost l{name, g.groups > 1 ? "gconv2d" : "conv2d"};
  const double cin_per_group = double(g.cin) / g.groups;
  const double weights = double(g.cout) * cin_per_group * g.kh * g.kw;
  const double x = double(g.batch) * g.cin * g.h * g.w;
  const double y = double(g.batch) * g.cout * g.out_h() * g.out_w();
  const double mac = y * cin_per_group * g.kh * g.kw;
  const double b = g.bias ? g.cout : 0;
  const double bias_flops = g.bias ? y : 0;
  l.params = int64_t(weights + b);
  l.fwd_matmul_flops = 2 * mac;
  l.fwd_flops = 2 * mac + bias_flops;
  l.bwd_input_flops = input_grad ? 2 * mac : 0;
  // The weight gradient reads the input and the output gradient and writes dW (and db).
  l.bwd_weight_flops = weight_grad ? 2 * mac + bias_flops : 0;
  if (!weight_grad) l.frozen_params = l.params;
  l.bytes_read =
      eb * ((weights + b + x) + (input_grad ? weights + y : 0) + (weight_grad ? x + y : 0));
  l.bytes_written = eb * (y + (input_grad ? x : 0) + (weight_grad ? weights + b : 0));
  l.output_bytes = eb * y;
  l.gemm_m = g.batch * g.out_h() * g.out_w();
  l.gemm_n = g.cout / g.groups;
  l.gemm_k = g.cin / g.groups * g.kh * g.kw;
  l.gemm_count = g.groups;
  // A depthwise convolution (one input channel per group) is a few multiply-adds per element,
  // which libraries run as a stencil, not as a GEMM: what a measured per-element rate
  // multiplies.
  if (g.groups > 1 && g.cin == g.groups) l.elements = std::max(x, y);
  return l;
}

LayerCost conv2d(const std::string& name, const Conv2dShape& s, int64_t eb, bool input_grad) {
  return conv(
      name,
      {s.batch, s.cin, s.h, s.w, s.cout, s.k, s.k, s.stride, s.stride, s.k / 2, s.k / 2, 1, false},
      eb, input_grad);
}

LayerCost batchnorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                    int64_t eb) {
  LayerCost l{name, "batchnorm"};
  const double e = double(batch) * channels * hw;
  l.params = 2 * channels;
  l.fwd_flops = 7 * e;              // mean 1, variance 2, normalize 2, scale and shift 2
  l.bwd_input_flops = 9 * e;        // the three-term input-gradient formula
  l.bwd_weight_flops = 3 * e;       // d(gamma) = sum(dy * xhat), d(beta) = sum(dy)
  l.bytes_read = eb * (e + e + e);  // forward x; backward x and dy
  l.bytes_written = eb * (e + e);   // forward y; backward dx
  l.output_bytes = eb * e;
  l.elements = e;
  return l;
}

LayerCost relu(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "relu"};
  l.fwd_flops = e;
  l.bwd_input_flops = e;
  l.bytes_read = eb * (e + 2 * e);  // forward x; backward y and dy
  l.bytes_written = eb * (e + e);
  l.output_bytes = eb * e;
  l.elements = e;
  return l;
}

LayerCost add(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "add"};
  l.fwd_flops = e;  // backward passes the same gradient to both inputs: no work
  l.bytes_read = eb * 2 * e;
  l.bytes_written = eb * e;
  l.output_bytes = eb * e;
  l.elements = e;
  return l;
}

LayerCost maxpool(const std::string& name, int64_t batch, int64_t channels, int64_t in_hw,
                  int64_t out_hw, int64_t k, int64_t eb) {
  LayerCost l{name, "maxpool"};
  const double x = double(batch) * channels * in_hw, y = double(batch) * channels * out_hw;
  l.fwd_flops = y * (k * k - 1);             // comparisons count as FLOPs; backward only scatters
  l.bytes_read = eb * x + (eb * y + 8 * y);  // forward x; backward dy and indices
  l.bytes_written = (eb * y + 8 * y) + eb * x;  // forward y and int64 indices; backward dx
  l.saved_bytes = 8 * y;                        // the indices
  l.output_bytes = eb * y;
  l.elements = x;
  return l;
}

LayerCost global_avgpool(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                         int64_t eb) {
  LayerCost l{name, "avgpool"};
  const double x = double(batch) * channels * hw, y = double(batch) * channels;
  l.fwd_flops = x + y;  // sum, then one division per channel
  l.bwd_input_flops = x;
  l.bytes_read = eb * (x + y);
  l.bytes_written = eb * (y + x);
  l.output_bytes = eb * y;
  l.elements = x;
  return l;
}

LayerCost embedding(const std::string& name, double tokens, int64_t vocab, int64_t dim,
                    int64_t eb) {
  LayerCost l{name, "embedding"};
  l.params = vocab * dim;
  l.bwd_weight_flops = tokens * dim;  // scatter-add of the output gradient
  l.bytes_read = eb * tokens * dim + 8 * tokens + eb * tokens * dim + 8 * tokens;
  // backward writes a dense gradient of the whole table (zero-filled, then scattered into)
  l.bytes_written = eb * tokens * dim + eb * double(vocab) * dim;
  l.output_bytes = eb * tokens * dim;
  return l;
}

LayerCost recurrent(const std::string& name, const std::string& cell, int64_t batch, int64_t length,
                    int64_t in, int64_t hidden, int64_t eb) {
  // gates: 1 (rnn), 4 (lstm), 3 (gru); elementwise FLOPs per hidden unit per step,
  // gate additions and activations included (tanh and sigmoid count as 1);
  // tensors kept per hidden unit per step for backward; state tensors per step.
  int64_t gates, elementwise, kept, states;
  if (cell == "rnn") {
    gates = 1, elementwise = 2, kept = 1, states = 1;
  } else if (cell == "lstm") {
    gates = 4, elementwise = 13, kept = 7, states = 2;
  } else if (cell == "gru") {
    gates = 3, elementwise = 10, kept = 6, states = 1;
  } else {
    throw std::invalid_argument("unknown recurrent cell " + cell);
  }
  LayerCost l{name, cell};
  const double B = batch, L = length, H = hidden, G = gates * hidden;
  const double gemm = L * 2 * B * (in * G + H * G);
  const double pointwise = L * (2 * B * G + elementwise * B * H);  // two biases + the cell
  l.params = int64_t(G * in + G * H + 2 * G);
  l.fwd_matmul_flops = gemm;
  l.fwd_flops = gemm + pointwise;
  l.bwd_input_flops = gemm + 2 * L * elementwise * B * H;  // dX and dh; 2x the pointwise work
  l.bwd_weight_flops = gemm + L * 2 * B * G;
  // Forward: one GEMM projects all inputs (reads W_ih once); each step then reads W_hh,
  // h, the projected and recurrent gate pre-activations and the cell state.
  const double fwd_read = (G * in + L * B * in) + L * (G * H + B * H + 2 * B * G + states * B * H);
  const double fwd_write = L * B * G + L * (B * G + states * B * H);
  l.bytes_read = eb * 3 * fwd_read;  // backward moves about twice the forward's bytes
  l.bytes_written = eb * 3 * fwd_write;
  l.saved_bytes = eb * L * kept * B * H;  // includes the layer's outputs h_t
  l.output_bytes = eb * L * B * H;
  // Per step: [x_t, h_{t-1}] times the stacked gate weights.
  l.gemm_m = batch, l.gemm_n = gates * hidden, l.gemm_k = in + hidden, l.gemm_count = length;
  return l;
}

LayerCost softmax_xent(const std::string& name, double rows, int64_t classes, int64_t eb) {
  LayerCost l{name, "softmax_xent"};
  const double e = rows * classes;
  l.fwd_flops = 5 * e;        // log-softmax: max, subtract, exp, sum, subtract log-sum
  l.bwd_input_flops = 3 * e;  // exp, minus one-hot, scale by 1/rows
  l.bytes_read = eb * (e + e);
  l.bytes_written = eb * (e + e);
  // A GPU's eager cross-entropy (PyTorch's CUDA log-softmax and NLL loss) passes over the
  // whole rows x classes tensor: log-softmax reads it for the maximum, the sum of exponentials
  // and the output it writes; backward the NLL loss zero-fills its gradient, and log-softmax's
  // backward reads that gradient for its sum, then it and the output again as it writes:
  // 4 + 1 + 4 passes. A row of up to 1024 classes stays in a warp's registers (forward 2
  // passes, backward 1 + 3); one that fits a block's 48 KiB of shared memory in fp32 with a
  // length that is a multiple of 4 is read once forward (2), its backward as for long rows (5).
  // Measured only for long rows: on an H200 at 8192 x 50257, 1.49 ms forward, 0.35 fill, 1.74
  // backward (data/measured/h200-sxm-141gb/shapes.csv), 4, 1 and 4 passes at its streaming
  // bandwidth; the shorter rows' paths are read from PyTorch's SoftMax.cu.
  const bool in_warp = classes <= 1024, in_shared = classes * 4 <= 48 * 1024 && classes % 4 == 0;
  l.gpu_pass_bytes = eb * e * (in_warp ? 6 : in_shared ? 7 : 9);
  l.saved_bytes = eb * e;  // log-probabilities
  l.output_bytes = eb * e;
  l.elements = e;
  return l;
}

OptimizerCost optimizer(const std::string& kind) {
  // Per parameter: FLOPs; the distinct tensors read and written (each once); the state; and
  // the element reads and writes of the eager implementations' passes (LibTorch's
  // torch::optim and torch.optim's, single- and multi-tensor alike), where every in-place or
  // out-of-place tensor operation of the update reads its distinct operands and writes its
  // result.
  // rmsprop: v = a*v + (1-a)*g*g (4), d = sqrt(v) + eps (2), m = mu*m + g/d (3), p -= lr*m (2);
  // passes: v.mul_, v.addcmul_(g, g), sqrt, add_(eps), m.mul_, m.addcdiv_(g, d), p.add_(m).
  if (kind == "rmsprop") return {11, 4, 3, 2, 11, 7};
  // adam: m = b1*m + (1-b1)*g (2), v = b2*v + (1-b2)*g*g (3), d = sqrt(v)/sqrt(bc2) + eps (3),
  // p -= step*m/d (2); bias corrections are scalars. Passes: m.mul_, m.add_(g), v.mul_,
  // v.addcmul_(g, g), sqrt, division by sqrt(bc2), add_(eps), p.addcdiv_(m, d).
  if (kind == "adam") return {10, 4, 3, 2, 12, 8};
  // adamw: adam plus the decoupled weight decay p -= lr*wd*p (2), one more pass (p.mul_).
  if (kind == "adamw") return {12, 4, 3, 2, 13, 9};
  // momentum: m = mu*m + g (2), p -= lr*m (2); passes m.mul_, m.add_(g), p.add_(m).
  if (kind == "momentum") return {4, 3, 2, 1, 5, 3};
  if (kind == "sgd") return {2, 2, 1, 0, 2, 1};  // p -= lr*g: p.add_(g)
  throw std::invalid_argument("unknown optimizer " + kind);
}

// --- Adversarial and reinforcement-learning reference models (wgan_gp, a3c) ---

LayerCost layernorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                    int64_t eb) {
  LayerCost l = batchnorm(name, batch, channels, hw, eb);
  l.op = "layernorm";
  return l;
}

LayerCost upsample2(const std::string& name, int64_t batch, int64_t channels, int64_t h, int64_t w,
                    int64_t eb) {
  LayerCost l{name, "upsample"};
  const double x = double(batch) * channels * h * w, y = 4 * x;
  l.bwd_input_flops = 3 * x;  // the sum of the four copies' gradients; forward only copies
  l.bytes_read = eb * (x + y);
  l.bytes_written = eb * (y + x);
  l.output_bytes = eb * y;
  return l;
}

// ---- Translation and speech reference models (transformer, seq2seq, deepspeech2) ----

LayerCost elementwise(const std::string& name, const std::string& op, double e, double fwd,
                      double bwd, double saved, int64_t eb) {
  LayerCost l{name, op};
  l.fwd_flops = fwd * e;
  l.bwd_input_flops = bwd * e;
  l.bytes_read = eb * (e + (bwd > 0 ? e + saved * e : 0));
  l.bytes_written = eb * (e + (bwd > 0 ? e : 0));
  l.saved_bytes = eb * saved * e;
  l.output_bytes = eb * e;
  return l;
}

LayerCost layernorm(const std::string& name, double rows, int64_t dim, int64_t eb) {
  LayerCost l{name, "layernorm"};
  const double e = rows * dim;
  l.params = 2 * dim;
  l.fwd_flops = 7 * e;
  l.bwd_input_flops = 9 * e;
  l.bwd_weight_flops = 3 * e;
  l.bytes_read = eb * 3 * e;
  l.bytes_written = eb * 2 * e;
  l.saved_bytes = eb * e + 2 * 4 * rows;  // its input; mean and 1/std per row (fp32)
  l.output_bytes = eb * e;
  return l;
}

LayerCost rmsnorm(const std::string& name, double rows, int64_t dim, int64_t eb) {
  LayerCost l{name, "rmsnorm"};
  const double e = rows * dim;
  l.params = dim;
  l.fwd_flops = 4 * e;
  l.bwd_input_flops = 7 * e;
  l.bwd_weight_flops = 2 * e;
  l.bytes_read = eb * 3 * e;
  l.bytes_written = eb * 2 * e;
  // Composed of LibTorch operators, autograd keeps the input, its square's mean, the
  // normalized input and the output of the scale.
  l.saved_bytes = eb * 2 * e + eb * rows;
  l.output_bytes = eb * e;
  l.elements = e;
  return l;
}

LayerCost attention(const std::string& name, int64_t batch, int64_t heads, int64_t q_len,
                    int64_t k_len, int64_t key_dim, int64_t value_dim, double score_ops,
                    bool dropout, bool q_scale, int64_t eb) {
  LayerCost l{name, "attention"};
  const double B = batch, scores = B * heads * q_len * k_len;
  const double q = B * q_len * key_dim, k = B * k_len * key_dim, v = B * k_len * value_dim,
               out = B * q_len * value_dim;
  const double matmul = 2 * B * q_len * k_len * (key_dim + value_dim);  // Q K^T and P V
  const double per_score = score_ops + 5 + (dropout ? 1 : 0);
  l.fwd_matmul_flops = matmul;
  l.fwd_flops = matmul + scores * per_score + (q_scale ? q : 0);
  // dQ, dK (from dScores) and dP, dV (from dOut): each GEMM twice; softmax backward 3.
  l.bwd_input_flops = 2 * matmul + scores * (score_ops + 3 + (dropout ? 1 : 0)) + (q_scale ? q : 0);
  // The score matrix moves once per pass of the eager composition (as the builders run it:
  // separate kernels, nothing fused). Forward: Q K^T writes it, each score op (a mask, a
  // scale) reads and writes it, softmax reads and writes it, dropout too (and writes its
  // mask), P V reads it. Backward: dP = dOut V^T writes it, dropout's backward reads it and
  // the mask and writes it, softmax's backward reads dP and P and writes dS, dV = P^T dOut
  // reads P, dQ and dK read dS each; a mask's or scale's gradient passes through.
  const double d = dropout ? 1 : 0;
  const double score_reads = (2 + score_ops + 2 * d) + (5 + 2 * d);
  const double score_writes = (2 + score_ops + 2 * d) + (2 + d);
  // Q, K, V: read by the forward's products and the backward's twice; the output written
  // once and its gradient read by two products.
  l.bytes_read = eb * (3 * (q + k + v) + 2 * out + score_reads * scores);
  l.bytes_written = eb * (3 * out + score_writes * scores);
  // Under autocast the mask's add (an fp32 mask), softmax and its backward run in fp32, and
  // casts to and from the half format bracket them: about every score pass at 4 bytes.
  l.fp32_bytes = eb * (score_reads + score_writes) * scores;
  l.fp32_saved_bytes = eb * scores;
  l.saved_bytes = eb * (q + k + v + scores * (dropout ? 2 : 1));  // inputs, weights, mask
  l.output_bytes = eb * out;
  return l;
}

LayerCost ctc(const std::string& name, double frames, double lattice, int64_t classes, int64_t eb) {
  LayerCost l{name, "ctc"};
  // Per lattice state and frame: a log-sum-exp of up to three predecessors plus the
  // emission, 10 FLOPs, for alpha (forward) and again for beta (backward), then 3 to
  // combine alpha and beta into the gradient; per frame and class 3 more (exp, subtract,
  // scale). Computed in fp32 whatever the model's dtype.
  l.fwd_flops = 10 * lattice;
  l.bwd_input_flops = 13 * lattice + 3 * frames * classes;
  l.bytes_read = 4.0 * (frames * classes * 2 + lattice);
  l.bytes_written = 4.0 * (2 * lattice + frames * classes);
  l.saved_bytes = 4.0 * lattice;  // alpha
  l.output_bytes = 4.0 * frames * classes;
  return l;
}

LayerCost linear_nobias(const std::string& name, double rows, int64_t in, int64_t out, int64_t eb,
                        bool input_grad, bool tied) {
  LayerCost l = linear(name, rows, in, out, eb, input_grad);
  l.params = tied ? 0 : in * out;
  l.fwd_flops -= rows * out;
  l.bwd_weight_flops -= rows * out;
  l.bytes_read -= eb * out;
  l.bytes_written -= eb * out;
  return l;
}

void scale_to_packed(LayerCost& l, double f) {
  l.fwd_flops *= f;
  l.fwd_matmul_flops *= f;
  l.bwd_input_flops *= f;
  l.bwd_weight_flops *= f;
  l.bytes_read *= f;
  l.bytes_written *= f;
  l.gpu_pass_bytes *= f;
  l.saved_bytes *= f;
}

// ---- Detection (faster_rcnn, retinanet) ----

LayerCost frozen_batchnorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                           int64_t eb, bool input_grad) {
  LayerCost l{name, "frozen_batchnorm"};
  const double e = double(batch) * channels * hw;
  l.fwd_flops = 2 * e;                     // scale and shift
  l.bwd_input_flops = input_grad ? e : 0;  // times the scale
  l.bytes_read = eb * (e + (input_grad ? e : 0));
  l.bytes_written = eb * (e + (input_grad ? e : 0));
  l.output_bytes = eb * e;
  return l;
}

LayerCost upsample_nearest(const std::string& name, double out_elements, int64_t eb) {
  LayerCost l{name, "upsample"};
  // Forward copies; backward sums the gradients of the copies of each input.
  l.bwd_input_flops = out_elements;
  l.bytes_read = eb * 2 * out_elements;
  l.bytes_written = eb * 2 * out_elements;
  l.output_bytes = eb * out_elements;
  return l;
}

LayerCost roi_align(const std::string& name, double rois, int64_t channels, int64_t out,
                    int64_t sampling, int64_t eb) {
  LayerCost l{name, "roi_align"};
  const double bins = rois * channels * out * out, samples = bins * sampling * sampling;
  // Each sample: 4 corner products summed (8); each bin: one division for the average.
  l.fwd_flops = 8 * samples + bins;
  l.bwd_input_flops = 8 * samples + bins;  // the same weights scatter the gradient back
  l.bytes_read = eb * (4 * samples + bins);
  l.bytes_written = eb * (bins + 4 * samples);
  l.output_bytes = eb * bins;
  return l;
}

LayerCost normalize(const std::string& name, double elements, int64_t eb) {
  LayerCost l{name, "normalize"};
  l.fwd_flops = 2 * elements;
  l.bytes_read = eb * elements;
  l.bytes_written = eb * elements;
  l.output_bytes = eb * elements;
  return l;
}

}  // namespace tb::cost

// ---- Image-classification reference models: see layers.h.
namespace tb::cost::vision {

LayerCost avgpool(const std::string& name, int64_t batch, int64_t channels, int64_t in_hw,
                  int64_t out_hw, int64_t k, int64_t eb) {
  LayerCost l{name, "avgpool"};
  const double x = double(batch) * channels * in_hw, y = double(batch) * channels * out_hw;
  l.fwd_flops = y * k * k;
  l.bwd_input_flops = y * k * k;
  l.bytes_read = eb * (x + y);  // forward x; backward dy
  l.bytes_written = eb * (y + x);
  l.output_bytes = eb * y;
  l.elements = x;
  return l;
}

LayerCost concat(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "concat"};
  l.bytes_read = eb * e;
  l.bytes_written = eb * e;
  l.output_bytes = eb * e;
  return l;
}

LayerCost dropout(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "dropout"};
  l.fwd_flops = 2 * e;
  l.bwd_input_flops = e;
  // forward: write the mask, scale it in place, read it and x, write y; backward: read dy
  // and the mask, write dx.
  l.bytes_read = eb * (e + 2 * e + 2 * e);
  l.bytes_written = eb * (e + e + e + e);
  l.saved_bytes = eb * e;
  l.output_bytes = eb * e;
  return l;
}

}  // namespace tb::cost::vision
