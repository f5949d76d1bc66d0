// SPDX-License-Identifier: BSD-3-Clause
// What a DNS over HTTPS request (RFC 8484 §4.1) must be before its query reaches the
// pipeline: the configured path, GET with the query in `?dns=` (base64url, no padding) or POST
// with it as the `application/dns-message` body, and a body that can be a DNS query. Anything
// else gets its HTTP status here (404, 405, 414, 415, 400, 413). Pure functions on what the
// HTTP/2 layer (https_connection.h) collected: callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace nscache::server {

// A DNS message over HTTP is at most what a TCP length prefix can say (RFC 8484 §6).
inline constexpr size_t kMaxDohMessage = 65535;
// A :path longer than this is answered 414: a GET query of the largest name and a few options
// fits many times over, and the header list bound (https_connection.h) stops longer ones anyway.
inline constexpr size_t kMaxDohPath = 8192;
inline constexpr std::string_view kDnsMessageType = "application/dns-message";
inline constexpr std::string_view kDohAllowedMethods = "GET, POST";

// A request's pseudo-headers and the two headers that matter, as received ("": absent).
struct DohRequestHead {
    std::string_view method;
    std::string_view path;  // :path, the query string included
    std::string_view content_type;
    std::string_view content_length;
};

struct DohHeadCheck {
    uint16_t status = 0;         // 0: the request goes on; else the status to answer with
    bool body_expected = false;  // POST: the query is the body, to be checked at its end
    std::vector<uint8_t> query;  // GET: the decoded `dns` parameter, already checked
};

// Checks the head of a request against the configured `https_path` (which starts with '/').
// In order: 414 a path over kMaxDohPath; 404 another path; 405 a method other than GET and
// POST (answer with `allow: GET, POST`); POST: 415 without content-type
// application/dns-message (parameters after ';' and letter case aside), 413 a content-length
// over kMaxDohMessage, 400 one that is not a number; GET: 400 without a `dns` parameter, or one
// that is not base64url, or that decodes to something check_dns_query() refuses.
DohHeadCheck check_request_head(const DohRequestHead& head, std::string_view https_path);

// 0 when `message` can be a DNS query (a whole header, QR clear: the pipeline answers what is
// malformed beyond that with FORMERR, as over UDP); 413 when longer than kMaxDohMessage; 400
// otherwise.
uint16_t check_dns_query(std::span<const uint8_t> message);

// The reason phrase of the statuses answered here ("Not Found"...), for the short text body of
// error answers; "Error" for others.
std::string_view doh_status_text(uint16_t status);

}  // namespace nscache::server
