// The control socket (a unix stream socket, mode 0600 or 0660 for a group) and the optional
// Prometheus endpoint, served by one thread of their own so nothing they do runs on a worker.
// One request per connection, a line in, text out (see docs/interfaces.md).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "cache/cache.h"
#include "config/address.h"
#include "control/stats.h"

namespace nscache::control {

struct ControlOptions {
    std::string socket_path;
    std::string group;  // empty: mode 0600
    std::optional<SocketAddress> metrics_listen;
    // Runs on every flush (the NSS shared map forgets what it published).
    std::function<void()> after_flush;
};

class ControlServer {
  public:
    ControlServer(const ControlOptions& options, cache::Cache& cache, StatsSources stats);
    ~ControlServer();

    // Binds the sockets (before privileges are dropped); an error message on failure.
    std::optional<std::string> open(uid_t owner_uid);
    void start();
    void stop();

    // The command interpreter, also used by tests: a request line in, the answer out.
    std::string execute(const std::string& request);

  private:
    void run();
    void serve_control_client(int fd);
    void serve_metrics_client(int fd);

    ControlOptions options_;
    cache::Cache& cache_;
    StatsSources stats_;
    uid_t owner_uid_ = 0;
    gid_t group_gid_ = 0;
    int control_fd_ = -1;
    int metrics_fd_ = -1;
    int stop_fd_ = -1;
    std::thread thread_;
};

}  // namespace nscache::control
