// SPDX-License-Identifier: BSD-3-Clause
#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nscache {

std::string parent_folder(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

bool make_parent_folder(const std::string& path) {
    const std::string folder = parent_folder(path);
    if (folder == "." || folder == "/") return true;
    if (mkdir(folder.c_str(), 0755) == 0 || errno == EEXIST) return true;
    if (errno != ENOENT || !make_parent_folder(folder)) return false;
    return mkdir(folder.c_str(), 0755) == 0 || errno == EEXIST;
}

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a directory";
    return "not a plain file";
}

std::optional<std::string> refuse(std::string& error, const std::string& why, int code) {
    error = why;
    errno = code;
    return std::nullopt;
}

}  // namespace

std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes,
                                           std::string& error) {
    // stat first, so a device is never even opened (opening some has effects of its own);
    // then O_NONBLOCK, so a FIFO swapped in between opens at once instead of waiting for a
    // writer, and fstat judges what was really opened.
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return refuse(error, std::strerror(errno), errno);
    if (!S_ISREG(st.st_mode)) {
        return refuse(error, std::string("not a regular file (") + kind_of(st.st_mode) + ")",
                      EINVAL);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return refuse(error, std::strerror(errno), errno);
    std::string text;
    const auto fail = [&](const std::string& why, int code) {
        close(fd);
        return refuse(error, why, code);
    };
    if (fstat(fd, &st) != 0) return fail(std::strerror(errno), errno);
    if (!S_ISREG(st.st_mode)) {
        return fail(std::string("not a regular file (") + kind_of(st.st_mode) + ")", EINVAL);
    }
    const std::string too_large = "larger than " + std::to_string(max_bytes) + " bytes";
    if (static_cast<uint64_t>(st.st_size) > max_bytes) return fail(too_large, EFBIG);
    // The size may change while we read: read to the end, but never past the bound.
    text.resize(static_cast<size_t>(st.st_size) + 1);
    size_t used = 0;
    while (used <= max_bytes) {
        if (used == text.size()) text.resize(std::min(text.size() * 2, max_bytes + 1));
        const ssize_t n = read(fd, text.data() + used, text.size() - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(std::strerror(errno), errno);
        if (n == 0) break;
        used += static_cast<size_t>(n);
    }
    if (used > max_bytes) return fail(too_large, EFBIG);
    close(fd);
    text.resize(used);
    text.shrink_to_fit();
    return text;
}

}  // namespace nscache
