// A bounded queue that hands items out in sequence order however they were produced, so
// several preprocessing threads give the same batch order as one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace pstrain {

template <typename T>
class OrderedQueue {
 public:
  explicit OrderedQueue(int64_t capacity) : capacity_(capacity) {}

  // Blocks while `seq` is `capacity` or more ahead of the consumer. False once closed.
  bool Push(int64_t seq, T item) {
    std::unique_lock<std::mutex> lock(mu_);
    can_push_.wait(lock, [&] { return closed_ || seq < next_pop_ + capacity_; });
    if (closed_) return false;
    items_.emplace(seq, std::move(item));
    if (seq == next_pop_) can_pop_.notify_one();
    return true;
  }

  // Blocks until the next item in sequence is there. False once closed.
  bool Pop(T* out) {
    std::unique_lock<std::mutex> lock(mu_);
    can_pop_.wait(lock, [&] { return closed_ || items_.count(next_pop_) > 0; });
    if (closed_) return false;
    auto it = items_.find(next_pop_);
    *out = std::move(it->second);
    items_.erase(it);
    ++next_pop_;
    can_push_.notify_all();
    return true;
  }

  // Wakes every waiter; later calls return false at once.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    can_push_.notify_all();
    can_pop_.notify_all();
  }

 private:
  const int64_t capacity_;
  std::mutex mu_;
  std::condition_variable can_push_;
  std::condition_variable can_pop_;
  std::map<int64_t, T> items_;
  int64_t next_pop_ = 0;
  bool closed_ = false;
};

}  // namespace pstrain
