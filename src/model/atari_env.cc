#include "model/atari_env.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tb {
namespace {

// Screen layout and colours after ALE's Pong.
constexpr int kTop = 34, kBottom = 194;  // the playfield's rows [kTop, kBottom)
constexpr int kOpponentX = 16, kAgentX = 140, kPaddleW = 4, kPaddleH = 16;
constexpr int kBallW = 2, kBallH = 4;
constexpr float kPaddleSpeed = 3, kOpponentSpeed = 2, kBallSpeed = 2;
struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kBackground{144, 72, 17}, kWall{236, 236, 236}, kBall{236, 236, 236},
    kAgent{92, 186, 92}, kOpponent{213, 130, 74};

void fill(std::vector<uint8_t>& rgb, int y0, int y1, int x0, int x1, Rgb c) {
  y0 = std::max(y0, 0), y1 = std::min(y1, PongEnv::kHeight);
  x0 = std::max(x0, 0), x1 = std::min(x1, PongEnv::kWidth);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      uint8_t* p = &rgb[(size_t(y) * PongEnv::kWidth + x) * 3];
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
}

}  // namespace

PongEnv::PongEnv(uint64_t seed)
    : rng_(seed),
      screen_(size_t(kHeight) * kWidth * 3),
      previous_(screen_.size()),
      stack_(size_t(kStack) * kSide * kSide) {
  reset();
}

void PongEnv::reset() {
  agent_score_ = opponent_score_ = 0;
  agent_y_ = opponent_y_ = (kTop + kBottom - kPaddleH) / 2.0f;
  serve(std::uniform_int_distribution<int>(0, 1)(rng_) ? 1 : -1);
  render(screen_);
  previous_ = screen_;
  for (int i = 0; i < kStack; ++i) push_observation(screen_, screen_);
}

void PongEnv::serve(int direction) {
  ball_x_ = (kWidth - kBallW) / 2.0f;
  ball_y_ = std::uniform_real_distribution<float>(kTop + 30, kBottom - 30)(rng_);
  ball_vx_ = kBallSpeed * direction;
  ball_vy_ = std::uniform_real_distribution<float>(-1.5f, 1.5f)(rng_);
}

float PongEnv::advance(int action) {
  ++frames_;
  if (action == 1) agent_y_ -= kPaddleSpeed;
  if (action == 2) agent_y_ += kPaddleSpeed;
  // The opponent follows the ball, slower than the ball can move: it can be beaten.
  const float target = ball_y_ + kBallH / 2.0f - kPaddleH / 2.0f;
  opponent_y_ += std::clamp(target - opponent_y_, -kOpponentSpeed, kOpponentSpeed);
  agent_y_ = std::clamp(agent_y_, float(kTop), float(kBottom - kPaddleH));
  opponent_y_ = std::clamp(opponent_y_, float(kTop), float(kBottom - kPaddleH));

  ball_x_ += ball_vx_, ball_y_ += ball_vy_;
  if (ball_y_ < kTop) ball_y_ = 2 * kTop - ball_y_, ball_vy_ = -ball_vy_;
  if (ball_y_ + kBallH > kBottom) ball_y_ = 2 * (kBottom - kBallH) - ball_y_, ball_vy_ = -ball_vy_;
  auto hits = [&](float paddle_x, float paddle_y) {
    return ball_x_ + kBallW >= paddle_x && ball_x_ <= paddle_x + kPaddleW &&
           ball_y_ + kBallH >= paddle_y && ball_y_ <= paddle_y + kPaddleH;
  };
  // Where the ball meets the paddle sets its new vertical speed, as in Pong.
  auto english = [&](float paddle_y) {
    return std::clamp((ball_y_ + kBallH / 2.0f - paddle_y - kPaddleH / 2.0f) / 4.0f, -2.5f, 2.5f);
  };
  if (ball_vx_ > 0 && hits(kAgentX, agent_y_)) {
    ball_vx_ = -ball_vx_, ball_vy_ = english(agent_y_);
    ball_x_ = kAgentX - kBallW;
  } else if (ball_vx_ < 0 && hits(kOpponentX, opponent_y_)) {
    ball_vx_ = -ball_vx_, ball_vy_ = english(opponent_y_);
    ball_x_ = kOpponentX + kPaddleW;
  }
  if (ball_x_ < 0) {
    ++agent_score_;
    serve(-1);
    return 1;
  }
  if (ball_x_ > kWidth) {
    ++opponent_score_;
    serve(1);
    return -1;
  }
  return 0;
}

void PongEnv::render(std::vector<uint8_t>& rgb) const {
  fill(rgb, 0, kHeight, 0, kWidth, kBackground);
  fill(rgb, 24, kTop, 0, kWidth, kWall);
  fill(rgb, kBottom, kBottom + 16, 0, kWidth, kWall);
  for (int i = 0; i < opponent_score_; ++i) fill(rgb, 4, 14, 8 + 3 * i, 10 + 3 * i, kOpponent);
  for (int i = 0; i < agent_score_; ++i) fill(rgb, 4, 14, 88 + 3 * i, 90 + 3 * i, kAgent);
  fill(rgb, int(opponent_y_), int(opponent_y_) + kPaddleH, kOpponentX, kOpponentX + kPaddleW,
       kOpponent);
  fill(rgb, int(agent_y_), int(agent_y_) + kPaddleH, kAgentX, kAgentX + kPaddleW, kAgent);
  fill(rgb, int(ball_y_), int(ball_y_) + kBallH, int(ball_x_), int(ball_x_) + kBallW, kBall);
}

// Max of the two frames (Atari sprites flicker), luminance, area resize to 84x84.
void PongEnv::push_observation(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  static thread_local std::vector<float> gray(size_t(kHeight) * kWidth);
  for (size_t i = 0; i < gray.size(); ++i) {
    const uint8_t* p = &a[i * 3];
    const uint8_t* q = &b[i * 3];
    gray[i] = (0.299f * std::max(p[0], q[0]) + 0.587f * std::max(p[1], q[1]) +
               0.114f * std::max(p[2], q[2])) /
              255.0f;
  }
  std::copy(stack_.begin() + kSide * kSide, stack_.end(), stack_.begin());
  float* out = &stack_[size_t(kStack - 1) * kSide * kSide];
  for (int i = 0; i < kSide; ++i) {
    const int r0 = i * kHeight / kSide, r1 = std::max(r0 + 1, (i + 1) * kHeight / kSide);
    for (int j = 0; j < kSide; ++j) {
      const int c0 = j * kWidth / kSide, c1 = std::max(c0 + 1, (j + 1) * kWidth / kSide);
      float sum = 0;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) sum += gray[size_t(r) * kWidth + c];
      out[i * kSide + j] = sum / float((r1 - r0) * (c1 - c0));
    }
  }
}

PongEnv::StepResult PongEnv::step(int action) {
  if (action < 0 || action >= kActions)
    throw std::invalid_argument("PongEnv: action " + std::to_string(action) + " is not 0, 1 or 2");
  StepResult r{0, false};
  for (int k = 0; k < kFrameSkip; ++k) {
    r.reward += advance(action);
    if (k == kFrameSkip - 2) render(previous_);
  }
  render(screen_);
  push_observation(previous_, screen_);
  r.done = agent_score_ >= kWinningScore || opponent_score_ >= kWinningScore;
  return r;
}

}  // namespace tb
