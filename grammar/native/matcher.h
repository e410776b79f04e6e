// What every native matcher offers the bindings and the batch fill.
#pragma once

#include <cstdint>
#include <memory>

namespace cad {

class NativeMatcher {
  public:
    virtual ~NativeMatcher() = default;
    virtual int32_t vocab_size() const = 0;
    // Write the allowed-token bitmask into ``row`` (bitmask_words(vocab_size()) words).
    // Safe to call from several threads at once on different matchers.
    virtual void fill_bitmask(uint32_t* row) = 0;

    // The bitmask row the bindings last filled for this matcher (the tensor, held there, and
    // where its row lies), so that filling the same row again skips checking the tensor.
    std::shared_ptr<void> bound_row;
};

}  // namespace cad
