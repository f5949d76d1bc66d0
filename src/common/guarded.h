// Guarded<T>: data that can only be reached while holding the mutex that protects it, so
// the type says which lock guards what (the idea of dnsdist's LockGuarded).
#pragma once

#include <mutex>
#include <utility>

namespace nscache {

template <typename T, typename Mutex = std::mutex>
class Guarded {
  public:
    class Locked {
      public:
        T* operator->() { return value_; }
        T& operator*() { return *value_; }

      private:
        friend class Guarded;
        Locked(T* value, Mutex& mu) : value_(value), lock_(mu) {}
        T* value_;
        std::unique_lock<Mutex> lock_;
    };

    template <typename... Args>
    explicit Guarded(Args&&... args) : value_(std::forward<Args>(args)...) {}

    Locked lock() { return Locked(&value_, mu_); }

  private:
    Mutex mu_;
    T value_;
};

}  // namespace nscache
