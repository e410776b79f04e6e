// A small persistent thread pool for filling many bitmask rows at once.
#pragma once

#include <cstddef>
#include <functional>

namespace cad {

// Run ``body(i)`` for every i in [0, count) on up to ``threads`` threads (the caller's thread
// included); returns when all are done. The first exception thrown by a body is rethrown.
void parallel_for(size_t count, int threads, const std::function<void(size_t)>& body);

}  // namespace cad
