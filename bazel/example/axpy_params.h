// Plain header from a cc_library dep: shows a .cu sees its deps' headers.
#pragma once

namespace example {
struct AxpyParams {
  float a;
  int n;
};
}  // namespace example
