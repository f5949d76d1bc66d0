// SPDX-License-Identifier: BSD-3-Clause
#include "server/doh_request.h"

#include <charconv>

#include "common/base64url.h"
#include "dns/wire.h"

namespace nscache::server {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (dns::ascii_lower(static_cast<uint8_t>(a[i])) !=
            dns::ascii_lower(static_cast<uint8_t>(b[i]))) {
            return false;
        }
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The media type without its parameters (RFC 9110 §8.3.1).
bool is_dns_message_type(std::string_view content_type) {
    const size_t semicolon = content_type.find(';');
    return equals_ignoring_case(trim(content_type.substr(0, semicolon)), kDnsMessageType);
}

// The value of the `dns` parameter of a query string, or false when there is none.
bool find_dns_parameter(std::string_view query, std::string_view& value) {
    while (!query.empty()) {  // each round drops one parameter: bounded by the path's length
        const size_t amp = query.find('&');
        const std::string_view parameter = query.substr(0, amp);
        if (parameter.substr(0, 4) == "dns=") {
            value = parameter.substr(4);
            return true;
        }
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
    return false;
}

}  // namespace

uint16_t check_dns_query(std::span<const uint8_t> message) {
    if (message.size() > kMaxDohMessage) return 413;
    if (message.size() < dns::kHeaderSize) return 400;
    if (dns::read_header(message).has(dns::flag::QR)) return 400;
    return 0;
}

DohHeadCheck check_request_head(const DohRequestHead& head, std::string_view https_path) {
    DohHeadCheck check;
    if (head.path.size() > kMaxDohPath) {
        check.status = 414;
        return check;
    }
    const size_t question_mark = head.path.find('?');
    if (head.path.substr(0, question_mark) != https_path) {
        check.status = 404;
        return check;
    }
    const std::string_view query =
        question_mark == std::string_view::npos ? "" : head.path.substr(question_mark + 1);
    if (head.method == "POST") {
        if (!is_dns_message_type(head.content_type)) {
            check.status = 415;
            return check;
        }
        if (!head.content_length.empty()) {
            uint64_t length = 0;
            const char* end = head.content_length.data() + head.content_length.size();
            auto [at, error] = std::from_chars(head.content_length.data(), end, length);
            if (error == std::errc::result_out_of_range) {
                check.status = 413;
                return check;
            }
            if (error != std::errc() || at != end) {
                check.status = 400;
                return check;
            }
            if (length > kMaxDohMessage) {
                check.status = 413;
                return check;
            }
        }
        check.body_expected = true;
        return check;
    }
    if (head.method != "GET") {
        check.status = 405;
        return check;
    }
    std::string_view encoded;
    if (!find_dns_parameter(query, encoded)) {
        check.status = 400;
        return check;
    }
    auto decoded = decode_base64url(encoded);
    if (!decoded) {
        check.status = 400;
        return check;
    }
    check.status = check_dns_query(*decoded);
    if (check.status == 0) check.query = std::move(*decoded);
    return check;
}

std::string_view doh_status_text(uint16_t status) {
    switch (status) {
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 413:
            return "Content Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 431:
            return "Request Header Fields Too Large";
        case 503:
            return "Service Unavailable";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Error";
    }
}

}  // namespace nscache::server
