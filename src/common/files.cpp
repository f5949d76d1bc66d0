#include "common/files.h"

#include <sys/stat.h>

#include <cerrno>

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

}  // namespace nscache
