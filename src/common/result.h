// SPDX-License-Identifier: BSD-3-Clause
// Result<T>: a value or an error message, the one error type at nscache's edges (config
// files, flags, start-up steps, control commands). C++20 has no std::expected; this is the
// small part of it the daemon uses. The data plane does not use it: a query's failures are
// DNS answers (RCODE, Extended DNS Error), never messages.
//
//   Result<int> parse_port(std::string_view s);      // a port, or why not
//   Result<void> open_socket();                      // nothing, or why not
//   if (auto r = parse_port(text); !r) return Error{"port: " + r.error()};
//
// Guarantees: holds exactly one of the two; value() on an error (or error() on a value) is a
// programming error and aborts, never undefined behaviour.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace nscache {

// What went wrong, in words for a log line or a CLI message.
struct Error {
    std::string message;
};

template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return check_value(), std::get<0>(state_); }
    const T& value() const& { return check_value(), std::get<0>(state_); }
    T&& value() && { return check_value(), std::move(std::get<0>(state_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const std::string& error() const {
        if (ok()) std::abort();
        return std::get<1>(state_).message;
    }

  private:
    void check_value() const {
        if (!ok()) std::abort();
    }
    std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : error_(std::move(error.message)), failed_(true) {}  // NOLINT

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const std::string& error() const {
        if (!failed_) std::abort();
        return error_;
    }

  private:
    std::string error_;
    bool failed_ = false;
};

}  // namespace nscache
