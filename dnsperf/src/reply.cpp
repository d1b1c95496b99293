#include "reply.hpp"

#include <cstring>
#include <netinet/in.h>

namespace xlatperf {

bool parse_header(const std::uint8_t* message, std::size_t length, DnsHeader& out) {
    if (length < 12) return false;
    const auto u16 = [message](std::size_t at) {
        return static_cast<std::uint16_t>((message[at] << 8) | message[at + 1]);
    };
    out.id = u16(0);
    out.qr = (message[2] & 0x80u) != 0;
    out.opcode = static_cast<std::uint8_t>((message[2] >> 3) & 0x0fu);
    out.tc = (message[2] & 0x02u) != 0;
    out.rcode = static_cast<std::uint8_t>(message[3] & 0x0fu);
    out.qdcount = u16(4);
    out.ancount = u16(6);
    return true;
}

bool same_endpoint(const sockaddr* a, socklen_t a_length, const SockAddr& b) {
    if (a == nullptr || a->sa_family != b.family()) return false;
    if (b.family() == AF_INET) {
        if (a_length < static_cast<socklen_t>(sizeof(sockaddr_in))) return false;
        const auto* x = reinterpret_cast<const sockaddr_in*>(a);
        const auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage);
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (b.family() == AF_INET6) {
        if (a_length < static_cast<socklen_t>(sizeof(sockaddr_in6))) return false;
        const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
        const auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage);
        return x->sin6_port == y->sin6_port &&
               std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return false;
}

Outcome ReplyClassifier::classify(OutstandingRing& ring, const std::uint8_t* message, std::size_t length,
                                  bool cut, const sockaddr* source, socklen_t source_length,
                                  std::int64_t received_ns) const {
    Outcome out;
    if (!same_endpoint(source, source_length, server_)) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::wrong_source;
        return out;
    }
    DnsHeader header;
    if (cut || !parse_header(message, length, header) || !header.qr || header.opcode != 0 ||
        header.qdcount > 1) {
        return out;  // malformed
    }
    // Servers may omit the question in an error reply; then only the ID matches it.
    const bool has_question = header.qdcount == 1;
    if (has_question ? length < query_.question_end() : header.rcode == 0) return out;

    OutstandingRing::Snapshot query;
    const auto found = ring.find(header.id, query);
    if (found == OutstandingRing::Lookup::unknown) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        return out;
    }
    // A reply older than the query (to an earlier use of its ID: another epoch in
    // the question's letter case, or received before the query was sent) is not
    // its answer.
    const auto match = has_question ? query_.match_question(message, length, subnet_.address(query.query_index),
                                                            query.sequence() >> 16)
                                    : QueryTemplate::Match::same;
    if (received_ns < query.sent_ns || match == QueryTemplate::Match::other_epoch) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        return out;
    }
    if (match == QueryTemplate::Match::different) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::wrong_question;
        return out;
    }
    out.query_index = query.query_index;
    out.sent_ns = query.sent_ns;
    if (found == OutstandingRing::Lookup::answered) {
        out.kind = ReplyKind::duplicate;
        return out;
    }

    ReplyKind kind = ReplyKind::valid;
    if (header.rcode != 0) {
        kind = ReplyKind::rcode;
    } else if (header.tc) {
        kind = ReplyKind::truncated;
    } else if (header.ancount == 0) {
        kind = ReplyKind::nodata;
    } else if (length - query_.question_end() < std::size_t{header.ancount} * kMinRecordSize) {
        return out;  // malformed: claims answers it cannot hold; the query stays outstanding
    }
    if (!ring.mark_answered(query)) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        return out;
    }
    out.rcode = header.rcode;
    out.latency_ns = received_ns - query.sent_ns;
    out.kind = out.latency_ns > timeout_ns_ ? ReplyKind::late : kind;
    return out;
}

}  // namespace xlatperf
