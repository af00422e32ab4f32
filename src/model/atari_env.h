#pragma once
// A small Pong-like game standing in for the Atari 2600 (TBD's A3C trains on Atari
// games; ALE is not a dependency of trainbench). It renders real 210x160 RGB frames, and
// the agent sees what an Atari agent sees after the usual (DQN / A3C) preprocessing:
// every action repeated for 4 frames, the pixel-wise maximum of the last two frames,
// grayscale, area-resized to 84x84, the last 4 such observations stacked.
// Deterministic for a seed.
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "cost/atari.h"

namespace tb {

class PongEnv {
 public:
  static constexpr int kHeight = 210, kWidth = 160;  // the Atari screen
  static constexpr int kSide = atari::kSide, kStack = atari::kStack, kFrameSkip = 4;
  static constexpr int kActions = atari::kActions;
  static constexpr int kWinningScore = 21;

  explicit PongEnv(uint64_t seed);
  // Starts a new game; observation() then holds its first frame four times.
  void reset();
  struct StepResult {
    float reward;  // points won minus points lost during the 4 frames
    bool done;     // one side reached 21
  };
  StepResult step(int action);

  // kStack x 84 x 84 floats in [0, 1], oldest first.
  const std::vector<float>& observation() const { return stack_; }
  // The last rendered frame, 210 x 160 x 3 bytes (row-major, RGB).
  const std::vector<uint8_t>& screen() const { return screen_; }
  int64_t frames() const { return frames_; }  // emulated frames since construction
  int agent_score() const { return agent_score_; }
  int opponent_score() const { return opponent_score_; }

 private:
  void serve(int direction);
  float advance(int action);  // one frame of physics; returns the reward
  void render(std::vector<uint8_t>& rgb) const;
  void push_observation(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

  std::mt19937_64 rng_;
  float ball_x_ = 0, ball_y_ = 0, ball_vx_ = 0, ball_vy_ = 0;
  float agent_y_ = 0, opponent_y_ = 0;  // top of each paddle
  int agent_score_ = 0, opponent_score_ = 0;
  int64_t frames_ = 0;
  std::vector<uint8_t> screen_, previous_;
  std::vector<float> stack_;
};

}  // namespace tb
