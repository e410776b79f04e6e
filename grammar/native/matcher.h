// What every native matcher offers the bindings and the batch fill.
#pragma once

#include <cstdint>

namespace cad {

class NativeMatcher {
  public:
    virtual ~NativeMatcher() = default;
    virtual int32_t vocab_size() const = 0;
    // Write the allowed-token bitmask into ``row`` (bitmask_words(vocab_size()) words).
    // Safe to call from several threads at once on different matchers.
    virtual void fill_bitmask(uint32_t* row) = 0;
};

}  // namespace cad
