#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cad {

namespace {

struct Job {
    size_t count;
    const std::function<void(size_t)>* body;
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::mutex error_lock;
    std::exception_ptr error;

    // Take items until none is left; true if this call finished the last one.
    bool work() {
        size_t finished = 0;
        for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
            try {
                (*body)(i);
            } catch (...) {
                std::lock_guard<std::mutex> guard(error_lock);
                if (!error) error = std::current_exception();
            }
            ++finished;
        }
        return finished && done.fetch_add(finished) + finished == count;
    }
};

class Pool {
  public:
    static Pool& instance() {
        static Pool* pool = new Pool();  // never destroyed: workers may outlive static teardown
        return *pool;
    }

    void run(size_t count, int threads, const std::function<void(size_t)>& body) {
        std::lock_guard<std::mutex> one_job_at_a_time(run_lock_);
        const size_t helpers = std::min<size_t>(threads > 1 ? threads - 1 : 0, count - 1);
        auto job = std::make_shared<Job>();
        job->count = count;
        job->body = &body;
        {
            std::lock_guard<std::mutex> guard(lock_);
            while (workers_.size() < helpers) workers_.emplace_back([this] { serve(); });
            job_ = job;
            wanted_ = helpers;
            ++generation_;
        }
        wake_.notify_all();
        job->work();
        std::unique_lock<std::mutex> guard(lock_);
        finished_.wait(guard, [&] { return job->done.load() == count && busy_ == 0; });
        wanted_ = 0;  // helpers that did not wake in time must not take this job any more
        job_.reset();
        if (job->error) std::rethrow_exception(job->error);
    }

  private:
    void serve() {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> guard(lock_);
        for (;;) {
            wake_.wait(guard, [&] { return generation_ != seen && wanted_ > 0; });
            seen = generation_;
            --wanted_;
            std::shared_ptr<Job> job = job_;
            ++busy_;
            guard.unlock();
            job->work();
            guard.lock();
            --busy_;
            finished_.notify_all();
        }
    }

    std::mutex run_lock_;
    std::mutex lock_;
    std::condition_variable wake_;
    std::condition_variable finished_;
    std::vector<std::thread> workers_;
    std::shared_ptr<Job> job_;
    uint64_t generation_ = 0;
    size_t wanted_ = 0;
    size_t busy_ = 0;
};

}  // namespace

void parallel_for(size_t count, int threads, const std::function<void(size_t)>& body) {
    if (count == 0) return;
    if (threads <= 1 || count == 1) {
        for (size_t i = 0; i < count; ++i) body(i);
        return;
    }
    Pool::instance().run(count, threads, body);
}

}  // namespace cad
