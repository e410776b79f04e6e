// Precomputing a grammar's masks in the background: the worker thread that owns the work,
// and the counts of what the mask cache holds by who built it.
//
// A compiled grammar returns as soon as its tables exist; a worker then builds state masks in
// the order a decode is likely to need them, while requests keep building any state the
// worker has not reached yet on the spot (they never wait for it). Both publish into the same
// cache, the first to finish a state winning.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cad {

// Give the calling thread the lowest priority (on Linux, where a thread has a nice value of
// its own), so that work done ahead of time takes no CPU from the threads serving requests.
inline void lower_thread_priority() {
#if defined(__linux__)
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
#endif
}

// What a grammar's mask cache holds: states (cache entries) and their bytes, by who built
// them, and whether the worker is still running.
struct MaskStats {
    size_t worker_states = 0;
    size_t worker_bytes = 0;
    size_t demand_states = 0;
    size_t demand_bytes = 0;
    bool worker_running = false;
};

// Counts behind MaskStats, updated by whoever publishes an entry and read from any thread.
class MaskCounters {
  public:
    void add(bool by_worker, size_t bytes) {
        (by_worker ? worker_states_ : demand_states_).fetch_add(1, std::memory_order_relaxed);
        (by_worker ? worker_bytes_ : demand_bytes_).fetch_add(bytes, std::memory_order_relaxed);
    }
    size_t worker_bytes() const { return worker_bytes_.load(std::memory_order_relaxed); }
    MaskStats snapshot(bool worker_running) const {
        return {worker_states_.load(std::memory_order_relaxed), worker_bytes(),
                demand_states_.load(std::memory_order_relaxed),
                demand_bytes_.load(std::memory_order_relaxed), worker_running};
    }

  private:
    std::atomic<size_t> worker_states_{0};
    std::atomic<size_t> worker_bytes_{0};
    std::atomic<size_t> demand_states_{0};
    std::atomic<size_t> demand_bytes_{0};
};

// A background thread that is asked to stop and joined when it is destroyed. Its owner
// declares it after every member the thread reads, so that it is destroyed (and the thread
// gone) before any of them.
class BackgroundWorker {
  public:
    BackgroundWorker() = default;
    BackgroundWorker(const BackgroundWorker&) = delete;
    BackgroundWorker& operator=(const BackgroundWorker&) = delete;
    ~BackgroundWorker() {
        stop_.store(true, std::memory_order_relaxed);
        if (thread_.joinable()) thread_.join();
    }

    // Run ``body`` (which should return soon after ``stopping()`` turns true) on a new thread
    // of the lowest priority; false, and nothing started, when one was started before.
    template <class Body>
    bool start(Body body) {
        if (thread_.joinable()) return false;
        running_.store(true, std::memory_order_relaxed);
        thread_ = std::thread([this, body = std::move(body)]() mutable {
            lower_thread_priority();
            body();
            running_.store(false, std::memory_order_release);
        });
        return true;
    }
    bool stopping() const { return stop_.load(std::memory_order_relaxed); }
    bool running() const { return running_.load(std::memory_order_acquire); }

  private:
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    std::thread thread_;
};

}  // namespace cad
