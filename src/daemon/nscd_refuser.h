// SPDX-License-Identifier: BSD-3-Clause
// Closes every connection made to an inherited nscd socket while the daemon starts. A socket
// given by systemd (or a launcher) listens already, and glibc's own nscd client, which the
// daemon's user lookups use (getpwnam for `user`, initgroups at the switch, getgrnam for
// `control-group`), would wait 5 s for an answer nobody gives before the host front runs: a
// connection closed at once sends it to NSS (`files`) at once instead. Other clients that
// connect meanwhile fall back to NSS the same way (glibc's documented behaviour when nscd
// answers nothing). Main thread: start() and stop(); its own thread does the accepting.
#pragma once

#include <thread>

namespace nscache::daemon {

class NscdRefuser {
  public:
    NscdRefuser() = default;
    ~NscdRefuser() { stop(); }
    NscdRefuser(const NscdRefuser&) = delete;
    NscdRefuser& operator=(const NscdRefuser&) = delete;

    // `listening_fd` stays the caller's (the nscd front adopts it later).
    void start(int listening_fd);
    // Returns once the thread accepts nothing more (before the front starts accepting).
    void stop();

  private:
    void run(int listening_fd);

    std::thread thread_;
    int stop_fd_ = -1;  // an eventfd: written by stop()
};

}  // namespace nscache::daemon
