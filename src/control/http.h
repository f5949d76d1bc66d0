// SPDX-License-Identifier: BSD-3-Clause
// The little HTTP/1.x that the metrics and health endpoints speak, in one place: the request
// line of a head read by ControlConnection (bounded to kMaxRequest bytes and its deadline),
// and one answer per connection (HTTP/1.0, Connection: close). GET and HEAD only. Pure
// functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nscache::control {

struct HttpRequest {
    std::string method;  // as sent: "GET", "HEAD", ...
    std::string path;    // without a query string
};

// The request line of `head` ("GET /ready HTTP/1.1\r\n..."): nullopt unless it is
// METHOD SP PATH SP HTTP/x.y ended by a line break, PATH starting with '/'.
std::optional<HttpRequest> parse_request_line(std::string_view head);

// A whole answer with its Content-Length; `head_only` (a HEAD request) leaves the body out.
// `extra` is header lines, each ending in "\r\n".
std::string http_reply(int status, std::string_view content_type, std::string_view body,
                       bool head_only = false, std::string_view extra = {});

// The error answer to a head of at most `max_bytes`, or nullopt (and `request` filled) when
// it is a request to route: 431 for a head cut at the bound, 400 for a malformed one.
std::optional<std::string> check_request(const std::string& head, size_t max_bytes,
                                         HttpRequest& request);

// The answer to a known path asked with a method other than GET or HEAD.
std::string method_not_allowed();

}  // namespace nscache::control
