// A DeviceSpec of `count` host or meta devices of `capacity` bytes each,
// its other fields at their defaults: a brace list naming only the first
// three of DeviceSpec's fields draws -Wmissing-field-initializers.
#pragma once

#include <cstddef>

#include "memory/device_system.h"

namespace zero {

inline DeviceSpec SimulatedDevices(DeviceSpec::Kind kind, int count, size_t capacity) {
  DeviceSpec spec;
  spec.kind = kind;
  spec.count = count;
  spec.capacity = capacity;
  return spec;
}

}  // namespace zero
