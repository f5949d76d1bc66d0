// SPDX-License-Identifier: BSD-3-Clause
// One connection to one Redis server through hiredis's asynchronous API, driven by our
// EventLoop: this class is hiredis's event-library adapter (its addRead/delRead/addWrite/
// delWrite/cleanup hooks set what epoll waits for), so Redis I/O never blocks the thread.
// Lives on one loop's thread; nothing here is shared.
//
// Contract: every command that command() accepted gets exactly one Listener::on_reply, from
// the loop: with the reply, or with null when the connection ended first (close(), an error,
// a protocol error, the server going away; closed_by_us() tells the first from the others). Nothing
// is delivered from inside command() or open(). A context hiredis frees by itself (an error) leaves
// the object closed and reusable.
//
// Bounded: what a server sends is judged while hiredis parses it, not once a reply is whole
// (hiredis 0.14 keeps every element of an unfinished array, with no limit on their number).
// A reply of a type its command never returns, one announcing more than kMaxReplyElements
// elements or holding more than kMaxReplyBytes of strings, one no command asked for, or more
// than 4 MiB of unparsed bytes: each ends the connection, every command on it failing.
#pragma once

#include <hiredis/async.h>
#include <hiredis/read.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string_view>

#include "common/event_loop.h"
#include "config/config.h"

namespace nscache::sharedcache {

class RedisConnection final : public EventHandler {
  public:
    class Listener {
      public:
        // `reply` is hiredis's and valid only during the call.
        virtual void on_reply(RedisConnection& connection, uint64_t token,
                              const redisReply* reply) = 0;

      protected:
        ~Listener() = default;
    };

    // The top-level reply types a command may answer with, as a mask of 1 << REDIS_REPLY_*.
    // An error reply is always allowed.
    using ReplyTypes = uint32_t;
    // GETRANGE: a bulk string (hiredis reads a nil bulk, "$-1", as one too).
    static constexpr ReplyTypes kStringReply = 1u << REDIS_REPLY_STRING;
    // SET (without NX or XX), AUTH, ASKING, PING: a status ("+OK", "+PONG").
    static constexpr ReplyTypes kStatusReply = 1u << REDIS_REPLY_STATUS;
    // CLUSTER SLOTS.
    static constexpr ReplyTypes kArrayReply = 1u << REDIS_REPLY_ARRAY;

    // Elements one reply may announce, its nested arrays' counted with its own. CLUSTER SLOTS
    // is the only array we ask for: 16384 single-slot ranges with a master and two replicas
    // of four fields each are ~250k; real clusters send a few hundred. At ~64 bytes an
    // element in hiredis, the bound holds a reply under ~8 MiB.
    static constexpr size_t kMaxReplyElements = size_t{1} << 17;
    // Bytes of the strings of one reply (a GETRANGE value is at most ~64 KiB).
    static constexpr size_t kMaxReplyBytes = size_t{4} << 20;

    RedisConnection(EventLoop& loop, Listener& listener);
    // Frees the context; the listener hears nothing more.
    ~RedisConnection();
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

    // Starts a non-blocking connect; commands sent meanwhile wait in hiredis's buffer. False
    // when it failed at once (no socket, refused on the spot): nothing is open then.
    bool open(const RedisEndpoint& endpoint);
    // Open and not being torn down: command() will take commands.
    bool usable() const { return ac_ != nullptr && !closing_; }
    // No context at all: open() may start one.
    bool idle() const { return ac_ == nullptr; }
    // Queues one command (binary-safe arguments) whose reply must be one of `expect`. False
    // when not usable.
    bool command(std::initializer_list<std::string_view> args, uint64_t token, ReplyTypes expect);
    // Ends the connection. Commands still waiting get on_reply(null): at once, or, when called
    // from inside a reply, right after that reply's handler returns.
    void close();
    // True while the null replies that follow close() are delivered: those commands failed
    // because we ended the connection, not because the server did anything.
    bool closed_by_us() const { return closed_by_us_; }
    // Commands sent and not yet answered.
    size_t pending() const { return pending_; }

    void on_event(uint32_t events) override;

  private:
    static void add_read(void* self);
    static void del_read(void* self);
    static void add_write(void* self);
    static void del_write(void* self);
    static void cleanup(void* self);
    static void reply_callback(redisAsyncContext* ac, void* reply, void* token);
    static void connect_callback(const redisAsyncContext* ac, int status);
    static void disconnect_callback(const redisAsyncContext* ac, int status);
    static void* create_string(const redisReadTask* task, char* str, size_t len);
    static void* create_array(const redisReadTask* task, int elements);
    static void* create_integer(const redisReadTask* task, long long value);
    static void* create_nil(const redisReadTask* task);
    // False for a reply no command is waiting for, or of a type its command never returns,
    // or past the bounds above (`elements`, `bytes`: what this part of it adds).
    static bool admit(const redisReadTask* task, size_t elements, size_t bytes);

    void set_interest(bool reading, bool writing);
    // close(), and what the connection does itself to a server past its bounds (`by_us`
    // false: the commands on it fail as after a protocol error).
    void end(bool by_us);

    EventLoop& loop_;
    Listener* listener_;  // null while the destructor runs
    redisAsyncContext* ac_ = nullptr;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    bool reading_ = false;
    bool writing_ = false;
    bool closing_ = false;  // hiredis is freeing the context (or will, once a callback returns)
    bool closed_by_us_ = false;  // ... because close() asked it to
    size_t pending_ = 0;
    // The reply types of the commands sent on this context whose replies the reader has not
    // begun, in the order sent (at most the commands pending).
    std::deque<ReplyTypes> expected_;
    size_t reply_elements_ = 0;  // of the reply being read
    size_t reply_bytes_ = 0;
};

}  // namespace nscache::sharedcache
