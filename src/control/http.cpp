// SPDX-License-Identifier: BSD-3-Clause
#include "control/http.h"

namespace nscache::control {
namespace {

const char* reason(int status) {
    switch (status) {
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 431:
            return "Request Header Fields Too Large";
        case 503:
            return "Service Unavailable";
        default:
            return "Error";
    }
}

}  // namespace

std::optional<HttpRequest> parse_request_line(std::string_view head) {
    const size_t end = head.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = head.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find(' ');
    if (first == std::string_view::npos || first == 0) return std::nullopt;
    const size_t second = line.find(' ', first + 1);
    if (second == std::string_view::npos) return std::nullopt;
    const std::string_view method = line.substr(0, first);
    std::string_view target = line.substr(first + 1, second - first - 1);
    const std::string_view version = line.substr(second + 1);
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/") return std::nullopt;
    if (target.empty() || target.front() != '/') return std::nullopt;
    for (char c : method) {
        if (c < 'A' || c > 'Z') return std::nullopt;
    }
    if (const size_t q = target.find('?'); q != std::string_view::npos)
        target = target.substr(0, q);
    return HttpRequest{std::string(method), std::string(target)};
}

std::string http_reply(int status, std::string_view content_type, std::string_view body,
                       bool head_only, std::string_view extra) {
    std::string out = "HTTP/1.0 " + std::to_string(status) + " " + reason(status) + "\r\n";
    if (!content_type.empty()) {
        out += "Content-Type: ";
        out += content_type;
        out += "\r\n";
    }
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    out += extra;
    out += "Connection: close\r\n\r\n";
    if (!head_only) out += body;
    return out;
}

std::optional<std::string> check_request(const std::string& head, size_t max_bytes,
                                         HttpRequest& request) {
    if (head.size() >= max_bytes && head.find("\r\n\r\n") == std::string::npos) {
        return http_reply(431, "", "");
    }
    auto parsed = parse_request_line(head);
    if (!parsed) return http_reply(400, "", "");
    request = std::move(*parsed);
    return std::nullopt;
}

std::string method_not_allowed() {
    return http_reply(405, "", "", false, "Allow: GET, HEAD\r\n");
}

}  // namespace nscache::control
