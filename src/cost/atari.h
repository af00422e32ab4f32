#pragma once
// What A3C's network sees of an Atari game after the usual (DQN / A3C) preprocessing, shared by
// the game the model plays (model/atari_env.h) and the cost of its network (cost/a3c.cc).

namespace tb::atari {

inline constexpr int kSide = 84;    // grayscale frames area-resized to 84x84
inline constexpr int kStack = 4;    // the last 4 observations stacked
inline constexpr int kActions = 3;  // Pong: stay, up, down

}  // namespace tb::atari
