#include "common/parallel.hpp"

#include "common/assert.hpp"

namespace objdirect {

HelperPool::HelperPool(std::size_t threads_max) : threads_max_(threads_max) {
  OBJDIRECT_ASSERT(threads_max >= 1, "a HelperPool needs at least one thread");
}

HelperPool::~HelperPool() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  for (auto& w : workers_) w->cv.notify_one();
  for (auto& w : workers_) w->thread.join();
}

bool HelperPool::try_run(std::function<void()> task) {
  std::lock_guard lk(mu_);
  OBJDIRECT_ASSERT(!stopping_, "HelperPool used while it ends");
  for (auto& w : workers_) {
    if (w->idle) {
      w->idle = false;
      w->task = std::move(task);
      w->cv.notify_one();
      return true;
    }
  }
  if (workers_.size() >= threads_max_) return false;
  auto w = std::make_unique<Worker>();
  w->idle = false;
  w->task = std::move(task);
  Worker* raw = w.get();
  w->thread = std::thread([this, raw] { main(raw); });
  workers_.push_back(std::move(w));
  return true;
}

std::size_t HelperPool::threads() const {
  std::lock_guard lk(mu_);
  return workers_.size();
}

void HelperPool::main(Worker* w) {
  std::unique_lock lk(mu_);
  for (;;) {
    w->cv.wait(lk, [&] { return stopping_ || w->task; });
    if (!w->task) return;  // stopping, nothing handed over
    std::function<void()> task = std::move(w->task);
    w->task = nullptr;
    lk.unlock();
    task();
    task = nullptr;  // release what it holds before it counts as idle
    lk.lock();
    w->idle = true;
  }
}

}  // namespace objdirect
