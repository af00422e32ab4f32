#include "cost/layers.h"

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
  l.bytes_read = eb * ((w + out + rows * in) + (input_grad ? w + rows * out : 0) +
                       (rows * in + rows * out));
  l.bytes_written = eb * (rows * out + (input_grad ? rows * in : 0) + w + out);
  l.output_bytes = eb * rows * out;
  return l;
}

int64_t Conv2dShape::out_h() const { return (h + 2 * (k / 2) - k) / stride + 1; }
int64_t Conv2dShape::out_w() const { return (w + 2 * (k / 2) - k) / stride + 1; }

LayerCost conv2d(const std::string& name, const Conv2dShape& s, int64_t eb, bool input_grad) {
  LayerCost l{name, "conv2d"};
  const double weights = double(s.cout) * s.cin * s.k * s.k;
  const double x = double(s.batch) * s.cin * s.h * s.w;
  const double y = double(s.batch) * s.cout * s.out_h() * s.out_w();
  const double mac = y * s.cin * s.k * s.k;
  l.params = int64_t(weights);  // no bias: BN follows every convolution
  l.fwd_matmul_flops = l.fwd_flops = 2 * mac;
  l.bwd_input_flops = input_grad ? 2 * mac : 0;
  l.bwd_weight_flops = 2 * mac;
  l.bytes_read = eb * ((weights + x) + (input_grad ? weights + y : 0) + (x + y));
  l.bytes_written = eb * (y + (input_grad ? x : 0) + weights);
  l.output_bytes = eb * y;
  return l;
}

LayerCost batchnorm(const std::string& name, int64_t batch, int64_t channels, int64_t hw,
                    int64_t eb) {
  LayerCost l{name, "batchnorm"};
  const double e = double(batch) * channels * hw;
  l.params = 2 * channels;
  l.fwd_flops = 7 * e;         // mean 1, variance 2, normalize 2, scale and shift 2
  l.bwd_input_flops = 9 * e;   // the three-term input-gradient formula
  l.bwd_weight_flops = 3 * e;  // d(gamma) = sum(dy * xhat), d(beta) = sum(dy)
  l.bytes_read = eb * (e + e + e);  // forward x; backward x and dy
  l.bytes_written = eb * (e + e);   // forward y; backward dx
  l.output_bytes = eb * e;
  return l;
}

LayerCost relu(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "relu"};
  l.fwd_flops = e;
  l.bwd_input_flops = e;
  l.bytes_read = eb * (e + 2 * e);  // forward x; backward y and dy
  l.bytes_written = eb * (e + e);
  l.output_bytes = eb * e;
  return l;
}

LayerCost add(const std::string& name, double e, int64_t eb) {
  LayerCost l{name, "add"};
  l.fwd_flops = e;  // backward passes the same gradient to both inputs: no work
  l.bytes_read = eb * 2 * e;
  l.bytes_written = eb * e;
  l.output_bytes = eb * e;
  return l;
}

LayerCost maxpool(const std::string& name, int64_t batch, int64_t channels, int64_t in_hw,
                  int64_t out_hw, int64_t k, int64_t eb) {
  LayerCost l{name, "maxpool"};
  const double x = double(batch) * channels * in_hw, y = double(batch) * channels * out_hw;
  l.fwd_flops = y * (k * k - 1);  // comparisons count as FLOPs; backward only scatters
  l.bytes_read = eb * x + (eb * y + 8 * y);          // forward x; backward dy and indices
  l.bytes_written = (eb * y + 8 * y) + eb * x;       // forward y and int64 indices; backward dx
  l.saved_bytes = 8 * y;                             // the indices
  l.output_bytes = eb * y;
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

LayerCost recurrent(const std::string& name, const std::string& cell, int64_t batch,
                    int64_t length, int64_t in, int64_t hidden, int64_t eb) {
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
  return l;
}

LayerCost softmax_xent(const std::string& name, double rows, int64_t classes, int64_t eb) {
  LayerCost l{name, "softmax_xent"};
  const double e = rows * classes;
  l.fwd_flops = 5 * e;        // log-softmax: max, subtract, exp, sum, subtract log-sum
  l.bwd_input_flops = 3 * e;  // exp, minus one-hot, scale by 1/rows
  l.bytes_read = eb * (e + e);
  l.bytes_written = eb * (e + e);
  l.saved_bytes = eb * e;  // log-probabilities
  l.output_bytes = eb * e;
  return l;
}

OptimizerCost optimizer(const std::string& kind) {
  // rmsprop: v = a*v + (1-a)*g*g (4), d = sqrt(v) + eps (2), m = mu*m + g/d (3), p -= lr*m (2)
  if (kind == "rmsprop") return {11, 4, 3, 2};
  // adam (LibTorch): m = b1*m + (1-b1)*g (2), v = b2*v + (1-b2)*g*g (3),
  // d = sqrt(v)/sqrt(bc2) + eps (3), p -= step*m/d (2); bias corrections are scalars.
  if (kind == "adam") return {10, 4, 3, 2};
  if (kind == "momentum") return {4, 3, 2, 1};  // m = mu*m + g (2), p -= lr*m (2)
  if (kind == "sgd") return {2, 2, 1, 0};       // p -= lr*g
  throw std::invalid_argument("unknown optimizer " + kind);
}

// ---- Detection (faster_rcnn, retinanet) ----

LayerCost conv2d_ext(const std::string& name, const Conv2dShape& s, int64_t eb, bool input_grad,
                     bool weight_grad, bool bias) {
  LayerCost l = conv2d(name, s, eb, input_grad);
  const double x = double(s.batch) * s.cin * s.h * s.w;
  const double y = double(s.batch) * s.cout * s.out_h() * s.out_w();
  if (!weight_grad) {
    l.bwd_weight_flops = 0;
    l.bytes_read -= eb * (x + y);
    l.bytes_written -= eb * double(s.cout) * s.cin * s.k * s.k;
  }
  if (bias) {
    l.params += s.cout;
    l.fwd_flops += y;  // the bias add, outside the GEMM
    l.bytes_read += eb * s.cout;
    if (weight_grad) {
      l.bwd_weight_flops += y;  // the bias gradient: a sum over positions
      l.bytes_written += eb * s.cout;
    }
  }
  return l;
}

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
