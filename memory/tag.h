// What an allocation is for. Every pool allocation carries one, so memory is
// measured per category instead of estimated.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace zero {

enum class Tag : int {
  kParameters = 0,
  kGradients,
  kOptimizerState,
  kCommunication,
  kGathered,  // stage 3: whole parameters gathered for a module's use
  kActivations,
  kOther,
};
inline constexpr int kNumTags = 7;

inline constexpr std::array<std::string_view, kNumTags> kTagNames = {
    "parameters", "gradients",  "optimizer_state", "communication",
    "gathered",   "activations", "other"};

constexpr std::string_view TagName(Tag tag) {
  return kTagNames[static_cast<int>(tag)];
}

inline std::optional<Tag> ParseTag(std::string_view name) {
  for (int i = 0; i < kNumTags; ++i) {
    if (kTagNames[i] == name) return static_cast<Tag>(i);
  }
  return std::nullopt;
}

}  // namespace zero
