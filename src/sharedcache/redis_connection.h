// One connection to one Redis server through hiredis's asynchronous API, driven by our
// EventLoop: this class is hiredis's event-library adapter (its addRead/delRead/addWrite/
// delWrite/cleanup hooks set what epoll waits for), so Redis I/O never blocks the thread.
// Lives on one loop's thread; nothing here is shared.
//
// Contract: every command that command() accepted gets exactly one Listener::on_reply, from
// the loop: with the reply, or with null when the connection ended first (close(), an error,
// a protocol error, the server going away). Nothing is delivered from inside command() or
// open(). A context hiredis frees by itself (an error) leaves the object closed and reusable.
#pragma once

#include <hiredis/async.h>
#include <hiredis/read.h>

#include <cstddef>
#include <cstdint>
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
    // Queues one command (binary-safe arguments). False when not usable.
    bool command(std::initializer_list<std::string_view> args, uint64_t token);
    // Ends the connection. Commands still waiting get on_reply(null): at once, or, when called
    // from inside a reply, right after that reply's handler returns.
    void close();
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
    // False for a reply no command is waiting for.
    static bool admit(const redisReadTask* task);

    void set_interest(bool reading, bool writing);

    EventLoop& loop_;
    Listener* listener_;  // null while the destructor runs
    redisAsyncContext* ac_ = nullptr;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    bool reading_ = false;
    bool writing_ = false;
    bool closing_ = false;  // hiredis is freeing the context (or will, once a callback returns)
    size_t pending_ = 0;
    uint64_t commands_sent_ = 0;    // on this context
    uint64_t replies_started_ = 0;  // top-level replies the reader began
};

}  // namespace nscache::sharedcache
