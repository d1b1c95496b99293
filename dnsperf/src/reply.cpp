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

const char* case_rewrite_name(CaseRewrite evidence) {
    switch (evidence) {
    case CaseRewrite::never_sent: return "never-sent";
    case CaseRewrite::answered_before: return "answered-before";
    case CaseRewrite::none: break;
    }
    return "none";
}

CaseRewrite case_rewrite_evidence(std::uint64_t sequence, std::uint64_t spelled, unsigned epoch_bits,
                                  bool epoch0_answered) {
    const std::uint64_t epoch = sequence >> 16;
    // Once a socket's epochs have gone round, every spelling was sent before: nothing is proved.
    if (epoch_bits == 0 || (epoch >> epoch_bits) != 0) return CaseRewrite::none;
    if (spelled > epoch) return CaseRewrite::never_sent;
    if (epoch == 1 && spelled == 0 && epoch0_answered) return CaseRewrite::answered_before;
    return CaseRewrite::none;
}

}  // namespace xlatperf
