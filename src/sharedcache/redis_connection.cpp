// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/redis_connection.h"

#include <hiredis/read.h>

#include <mutex>
#include <string>

namespace nscache::sharedcache {
namespace {

// Unparsed bytes hiredis may hold for one connection. A value is at most ~64 KiB (lookups
// read with GETRANGE), so more than this is a server sending something we never asked for;
// without a bound hiredis would buffer it all.
constexpr size_t kMaxBufferedReply = size_t{4} << 20;

RedisConnection* self_of(void* p) {
    return static_cast<RedisConnection*>(p);
}

// hiredis's own reply constructors, the same table for every reader.
const redisReplyObjectFunctions* g_hiredis_functions = nullptr;
std::once_flag g_functions_once;

}  // namespace

// hiredis 0.14 aborts the process (an assert) on a reply that no command asked for: a server,
// or anything listening at its address, could kill the daemon with one extra "+OK". The reader
// builds replies through these wrappers, which refuse a reply beyond the commands sent; the
// reader then reports an error and hiredis drops the connection, every command on it failing.
//
// The same wrappers bound what a reply may make hiredis keep. hiredis calls create_array at an
// array's header, before its elements arrive, and keeps each element it parses until the
// array is whole: refused there, a reply of the wrong type or size is dropped at its first
// line, not after the server has streamed gigabytes into it.
void* RedisConnection::create_string(const redisReadTask* task, char* str, size_t len) {
    if (!admit(task, 0, len)) return nullptr;
    return g_hiredis_functions->createString(task, str, len);
}

void* RedisConnection::create_array(const redisReadTask* task, int elements) {
    if (!admit(task, elements > 0 ? static_cast<size_t>(elements) : 0, 0)) return nullptr;
    return g_hiredis_functions->createArray(task, elements);
}

void* RedisConnection::create_integer(const redisReadTask* task, long long value) {
    if (!admit(task, 0, 0)) return nullptr;
    return g_hiredis_functions->createInteger(task, value);
}

void* RedisConnection::create_nil(const redisReadTask* task) {
    if (!admit(task, 0, 0)) return nullptr;
    return g_hiredis_functions->createNil(task);
}

bool RedisConnection::admit(const redisReadTask* task, size_t elements, size_t bytes) {
    RedisConnection* c = self_of(task->privdata);
    if (task->parent == nullptr) {  // a new reply: the next command's
        if (c->expected_.empty()) return false;
        const ReplyTypes expect = c->expected_.front() | (1u << REDIS_REPLY_ERROR);
        c->expected_.pop_front();
        if (task->type < 0 || task->type >= 32 || (expect & (1u << task->type)) == 0) {
            return false;
        }
        c->reply_elements_ = c->reply_bytes_ = 0;
    }
    c->reply_elements_ += elements;
    c->reply_bytes_ += bytes;
    return c->reply_elements_ <= kMaxReplyElements && c->reply_bytes_ <= kMaxReplyBytes;
}

RedisConnection::RedisConnection(EventLoop& loop, Listener& listener)
    : loop_(loop), listener_(&listener) {}

RedisConnection::~RedisConnection() {
    listener_ = nullptr;
    if (ac_ != nullptr) redisAsyncFree(ac_);  // runs cleanup(): leaves the loop
}

bool RedisConnection::open(const RedisEndpoint& endpoint) {
    if (ac_ != nullptr) return usable();
    // hiredis 0.14 resolves with getaddrinfo: given a numeric address, that is a parse, never
    // a lookup (config accepts no host names).
    redisAsyncContext* ac = nullptr;
    if (!endpoint.unix_path.empty()) {
        ac = redisAsyncConnectUnix(endpoint.unix_path.c_str());
    } else {
        std::string host = endpoint.address.to_string();
        host.resize(host.rfind(':'));
        if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
        ac = redisAsyncConnect(host.c_str(), endpoint.address.port());
    }
    if (ac == nullptr) return false;
    if (ac->err != 0) {
        redisAsyncFree(ac);
        return false;
    }
    if (!loop_.add(ac->c.fd, 0, this, registration_)) {
        redisAsyncFree(ac);
        return false;
    }
    ac_ = ac;
    closing_ = false;
    closed_by_us_ = false;
    reading_ = writing_ = false;
    expected_.clear();
    std::call_once(g_functions_once, [ac] { g_hiredis_functions = ac->c.reader->fn; });
    static redisReplyObjectFunctions counting{create_string, create_array, create_integer,
                                              create_nil, g_hiredis_functions->freeObject};
    ac->c.reader->fn = &counting;
    ac->c.reader->privdata = this;
    ac->data = this;
    ac->ev.data = this;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    redisAsyncSetDisconnectCallback(ac, disconnect_callback);
    // Also waits for the socket to become writable: that is how the connect's end is seen.
    redisAsyncSetConnectCallback(ac, connect_callback);
    return true;
}

bool RedisConnection::command(std::initializer_list<std::string_view> args, uint64_t token,
                              ReplyTypes expect) {
    if (!usable()) return false;
    constexpr size_t kMaxArgs = 8;
    const char* argv[kMaxArgs];
    size_t lengths[kMaxArgs];
    int argc = 0;
    for (std::string_view arg : args) {
        if (argc == static_cast<int>(kMaxArgs)) return false;
        argv[argc] = arg.data();
        lengths[argc] = arg.size();
        ++argc;
    }
    if (redisAsyncCommandArgv(ac_, reply_callback,
                              reinterpret_cast<void*>(static_cast<uintptr_t>(token)), argc, argv,
                              lengths) != REDIS_OK) {
        return false;
    }
    ++pending_;
    expected_.push_back(expect);
    return true;
}

void RedisConnection::close() {
    end(true);
}

void RedisConnection::end(bool by_us) {
    if (ac_ == nullptr || closing_) return;
    closing_ = true;
    closed_by_us_ = by_us;
    // Inside a hiredis callback this only marks the context; hiredis frees it when the
    // callback returns.
    redisAsyncFree(ac_);
}

void RedisConnection::on_event(uint32_t events) {
    redisAsyncContext* const ac = ac_;
    if (ac == nullptr) return;
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) redisAsyncHandleRead(ac);
    // The context may be gone now (freed on an error, its cleanup() cleared ac_).
    if (ac_ != ac) return;
    if (events & EPOLLOUT) redisAsyncHandleWrite(ac);
    if (ac_ != ac) return;
    const redisReader* reader = ac->c.reader;
    // The server's doing, as a protocol error is: its commands fail as the server's fault.
    if (reader != nullptr && reader->len - reader->pos > kMaxBufferedReply) end(false);
}

void RedisConnection::set_interest(bool reading, bool writing) {
    if (reading == reading_ && writing == writing_) return;
    reading_ = reading;
    writing_ = writing;
    loop_.modify(registration_, (reading ? EPOLLIN : 0u) | (writing ? EPOLLOUT : 0u));
}

void RedisConnection::add_read(void* self) {
    self_of(self)->set_interest(true, self_of(self)->writing_);
}

void RedisConnection::del_read(void* self) {
    self_of(self)->set_interest(false, self_of(self)->writing_);
}

void RedisConnection::add_write(void* self) {
    self_of(self)->set_interest(self_of(self)->reading_, true);
}

void RedisConnection::del_write(void* self) {
    self_of(self)->set_interest(self_of(self)->reading_, false);
}

// hiredis is about to free the context and close its socket.
void RedisConnection::cleanup(void* self) {
    RedisConnection* c = self_of(self);
    c->loop_.remove(c->registration_);
    c->ac_ = nullptr;
    c->closing_ = false;
    c->closed_by_us_ = false;
    c->reading_ = c->writing_ = false;
    c->pending_ = 0;
    c->expected_.clear();
}

void RedisConnection::reply_callback(redisAsyncContext* ac, void* reply, void* token) {
    RedisConnection* c = self_of(ac->data);
    if (c->pending_ > 0) --c->pending_;
    // A null reply comes only while hiredis frees the context: take no more commands.
    if (reply == nullptr) c->closing_ = true;
    if (c->listener_ != nullptr) {
        c->listener_->on_reply(*c, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(token)),
                               static_cast<const redisReply*>(reply));
    }
}

void RedisConnection::connect_callback(const redisAsyncContext* ac, int status) {
    if (status != REDIS_OK) self_of(ac->data)->closing_ = true;  // hiredis frees it next
}

void RedisConnection::disconnect_callback(const redisAsyncContext* ac, int) {
    self_of(ac->data)->closing_ = true;
}

}  // namespace nscache::sharedcache
