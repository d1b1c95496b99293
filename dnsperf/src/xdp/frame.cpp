#include "xdp/frame.hpp"

#include <cstring>
#include <netinet/in.h>
#include <stdexcept>

namespace xlatperf::xdp {
namespace {

constexpr std::size_t kEthernet = 14;
constexpr std::size_t kVlanTag = 4;
constexpr std::size_t kIpv4 = 20;
constexpr std::size_t kIpv6 = 40;
constexpr std::size_t kUdp = 8;
constexpr std::uint16_t kEtherIpv4 = 0x0800;
constexpr std::uint16_t kEtherIpv6 = 0x86dd;
constexpr std::uint16_t kEtherVlan = 0x8100;
constexpr std::uint16_t kEtherQinQ = 0x88a8;
constexpr std::uint8_t kProtoUdp = 17;
constexpr std::uint8_t kProtoIpip = 4;

void put16(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }

// Contribution of one byte at a given parity to a 16-bit big-endian word sum.
std::uint64_t byte_sum(std::uint8_t b, bool odd) { return odd ? b : std::uint64_t{b} << 8; }

}  // namespace

std::uint64_t ones_sum(const std::uint8_t* data, std::size_t length, bool odd_start) {
    std::uint64_t sum = 0;
    std::size_t i = 0;
    if (odd_start && length > 0) {
        sum += data[0];
        i = 1;
    }
    for (; i + 1 < length; i += 2) sum += get16(data + i);
    if (i < length) sum += std::uint64_t{data[i]} << 8;
    return sum;
}

std::uint16_t fold_complement(std::uint64_t sum) {
    while (sum >> 16) sum = (sum & 0xffffu) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum & 0xffffu);
}

FrameTemplate::FrameTemplate(const QueryTemplate& query, const FrameSpec& spec)
    : query_(query), family_(spec.server.family()), encapsulate_(spec.encapsulate) {
    if (family_ != AF_INET && family_ != AF_INET6) throw std::invalid_argument("frame: server must be IPv4 or IPv6");
    if (encapsulate_ && family_ != AF_INET) throw std::invalid_argument("frame: only IPv4 is encapsulated (in IPv6)");
    address_length_ = family_ == AF_INET ? 4 : 16;
    outer_ = kEthernet + (spec.vlan != 0 ? kVlanTag : 0);
    ip_ = outer_ + (encapsulate_ ? kIpv6 : 0);
    udp_ = ip_ + (family_ == AF_INET ? kIpv4 : kIpv6);
    dns_ = udp_ + kUdp;
    const std::size_t dns_length = query.size();
    const std::size_t udp_length = kUdp + dns_length;
    frame_.assign(dns_ + dns_length, 0);
    std::uint8_t* f = frame_.data();

    std::memcpy(f, spec.destination_mac.data(), 6);
    std::memcpy(f + 6, spec.source_mac.data(), 6);
    if (spec.vlan != 0) {
        put16(f + 12, kEtherVlan);
        put16(f + 14, spec.vlan & 0x0fffu);
    }
    put16(f + outer_ - 2, family_ == AF_INET && !encapsulate_ ? kEtherIpv4 : kEtherIpv6);
    if (encapsulate_) {
        std::uint8_t* outer = f + outer_;
        outer[0] = 0x60;
        put16(outer + 4, static_cast<std::uint32_t>(kIpv4 + udp_length));
        outer[6] = kProtoIpip;
        outer[7] = spec.hop_limit;
        std::memcpy(outer + 24, spec.outer_destination.data(), 16);  // source (8..23) varies
    }

    const std::uint8_t* server_address = nullptr;
    std::uint16_t server_port = 0;
    if (family_ == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&spec.server.storage);
        server_address = reinterpret_cast<const std::uint8_t*>(&sin->sin_addr);
        server_port = ntohs(sin->sin_port);
        std::uint8_t* ip = f + ip_;
        ip[0] = 0x45;
        put16(ip + 2, static_cast<std::uint32_t>(kIpv4 + udp_length));
        put16(ip + 6, 0x4000);  // DF, no fragment
        ip[8] = spec.hop_limit;
        ip[9] = kProtoUdp;
        std::memcpy(ip + 16, server_address, 4);  // source (12..15) varies
        ip_base_sum_ = ones_sum(ip, kIpv4);
    } else {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&spec.server.storage);
        server_address = reinterpret_cast<const std::uint8_t*>(&sin6->sin6_addr);
        server_port = ntohs(sin6->sin6_port);
        std::uint8_t* ip = f + ip_;
        ip[0] = 0x60;
        put16(ip + 4, static_cast<std::uint32_t>(udp_length));
        ip[6] = kProtoUdp;
        ip[7] = spec.hop_limit;
        std::memcpy(ip + 24, server_address, 16);  // source (8..23) varies
    }
    std::uint8_t* udp = f + udp_;
    put16(udp + 2, server_port);
    put16(udp + 4, static_cast<std::uint32_t>(udp_length));
    query.write(f + dns_, 0, 0, 0);
    // Varying DNS bytes are zero in the template: ID, the first label, the epoch letters.
    std::memset(f + dns_ + kLabelOffset, 0, kLabelLength);
    for (std::size_t at : query.epoch_letter_offsets()) f[dns_ + at] = 0;

    // Pseudo-header (source address varies) + UDP header + DNS, checksum field zero.
    // (IPv6's 32-bit length and next-header fields sum the same as IPv4's 16-bit ones.)
    udp_base_sum_ = ones_sum(server_address, address_length_) + kProtoUdp + udp_length + ones_sum(udp, udp_length);
}

void FrameTemplate::write_template(std::uint8_t* frame) const { std::memcpy(frame, frame_.data(), frame_.size()); }

void FrameTemplate::write(std::uint8_t* frame, const std::uint8_t* source, std::uint16_t port, std::uint16_t id,
                          std::uint32_t name_address, std::uint64_t epoch, const std::uint8_t* outer_source) const {
    if (encapsulate_ && outer_source != nullptr) std::memcpy(frame + outer_ + 8, outer_source, 16);
    std::uint8_t* dns = frame + dns_;
    put16(dns, id);
    write_label(name_address, reinterpret_cast<char*>(dns + kLabelOffset));
    std::uint64_t sum = udp_base_sum_ + ones_sum(source, address_length_) + port + id +
                        ones_sum(dns + kLabelOffset, kLabelLength, (kLabelOffset & 1u) != 0);
    const auto& letters = query_.epoch_letter_offsets();
    const auto& wire = query_.wire();
    for (std::size_t b = 0; b < letters.size(); ++b) {
        const std::size_t at = letters[b];
        dns[at] = static_cast<std::uint8_t>(wire[at] ^ (((epoch >> b) & 1u) ? 0x20u : 0u));
        sum += byte_sum(dns[at], (at & 1u) != 0);
    }
    std::uint8_t* udp = frame + udp_;
    put16(udp, port);
    std::uint16_t udp_check = fold_complement(sum);
    put16(udp + 6, udp_check == 0 ? 0xffffu : udp_check);
    std::uint8_t* ip = frame + ip_;
    if (family_ == AF_INET) {
        std::memcpy(ip + 12, source, 4);
        put16(ip + 10, fold_complement(ip_base_sum_ + ones_sum(source, 4)));
    } else {
        std::memcpy(ip + 8, source, 16);
    }
}

const char* to_string(FrameStatus status) {
    switch (status) {
        case FrameStatus::ok: return "ok";
        case FrameStatus::truncated: return "truncated";
        case FrameStatus::not_udp: return "not_udp";
        case FrameStatus::fragment: return "fragment";
        case FrameStatus::bad_header: return "bad_header";
        case FrameStatus::bad_checksum: return "bad_checksum";
    }
    return "?";
}

namespace {

// The IP packet at `l3` of EtherType `type` (the frame's `length` bytes), as parse_reply describes.
FrameStatus parse_ip(const std::uint8_t* frame, std::size_t length, std::size_t l3, std::uint16_t type,
                     ParsedReply& out) {
    const std::uint8_t* udp = nullptr;
    std::size_t available = 0;  // bytes from the UDP header to the end of the IP packet
    std::uint64_t pseudo = 0;
    bool verify = true;
    if (type == kEtherIpv4) {
        if (length < l3 + kIpv4) return FrameStatus::truncated;
        const std::uint8_t* ip = frame + l3;
        if ((ip[0] >> 4) != 4) return FrameStatus::bad_header;
        const std::size_t header = std::size_t{ip[0] & 0x0fu} * 4;
        const std::size_t total = get16(ip + 2);
        if (header < kIpv4 || total < header) return FrameStatus::bad_header;
        if (length < l3 + header || length < l3 + total) return FrameStatus::truncated;
        if ((get16(ip + 6) & 0x3fffu) != 0) return FrameStatus::fragment;
        if (ip[9] != kProtoUdp) return FrameStatus::not_udp;
        if (fold_complement(ones_sum(ip, header)) != 0) return FrameStatus::bad_checksum;
        udp = ip + header;
        available = total - header;
        if (available < kUdp) return FrameStatus::truncated;
        auto* sin = reinterpret_cast<sockaddr_in*>(&out.source.storage);
        *sin = sockaddr_in{};
        sin->sin_family = AF_INET;
        std::memcpy(&sin->sin_addr, ip + 12, 4);
        std::memcpy(&sin->sin_port, udp, 2);
        out.source.length = sizeof(sockaddr_in);
        out.destination = ip + 16;
        pseudo = ones_sum(ip + 12, 8) + kProtoUdp;
        verify = get16(udp + 6) != 0;  // IPv4: zero means no checksum was sent
    } else if (type == kEtherIpv6) {
        if (length < l3 + kIpv6) return FrameStatus::truncated;
        const std::uint8_t* ip = frame + l3;
        if ((ip[0] >> 4) != 6) return FrameStatus::bad_header;
        if (ip[6] != kProtoUdp) return FrameStatus::not_udp;
        available = get16(ip + 4);
        if (length < l3 + kIpv6 + available) return FrameStatus::truncated;
        if (available < kUdp) return FrameStatus::truncated;
        udp = ip + kIpv6;
        if (get16(udp + 6) == 0) return FrameStatus::bad_checksum;  // mandatory over IPv6
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.source.storage);
        *sin6 = sockaddr_in6{};
        sin6->sin6_family = AF_INET6;
        std::memcpy(&sin6->sin6_addr, ip + 8, 16);
        std::memcpy(&sin6->sin6_port, udp, 2);
        out.source.length = sizeof(sockaddr_in6);
        out.destination = ip + 24;
        pseudo = ones_sum(ip + 8, 32) + kProtoUdp;
    } else {
        return FrameStatus::not_udp;
    }
    const std::size_t udp_length = get16(udp + 4);
    if (udp_length < kUdp || udp_length > available) return FrameStatus::bad_header;
    if (verify && fold_complement(pseudo + udp_length + ones_sum(udp, udp_length)) != 0) {
        return FrameStatus::bad_checksum;
    }
    out.destination_port = get16(udp + 2);
    out.message = udp + kUdp;
    out.length = udp_length - kUdp;
    return FrameStatus::ok;
}


// The Ethernet header (and one VLAN tag): the L3 offset and EtherType, false when truncated.
bool parse_ethernet(const std::uint8_t* frame, std::size_t length, std::size_t& l3, std::uint16_t& type) {
    if (length < kEthernet) return false;
    l3 = kEthernet;
    type = get16(frame + 12);
    if (type == kEtherVlan || type == kEtherQinQ) {
        if (length < kEthernet + kVlanTag) return false;
        type = get16(frame + 16);
        l3 += kVlanTag;
    }
    return true;
}

}  // namespace

FrameStatus parse_reply(const std::uint8_t* frame, std::size_t length, ParsedReply& out) {
    std::size_t l3 = 0;
    std::uint16_t type = 0;
    if (!parse_ethernet(frame, length, l3, type)) return FrameStatus::truncated;
    out.outer_source = out.outer_destination = nullptr;
    return parse_ip(frame, length, l3, type, out);
}

FrameStatus parse_encapsulated_reply(const std::uint8_t* frame, std::size_t length, ParsedReply& out) {
    std::size_t l3 = 0;
    std::uint16_t type = 0;
    if (!parse_ethernet(frame, length, l3, type)) return FrameStatus::truncated;
    if (type != kEtherIpv6) return FrameStatus::not_udp;
    if (length < l3 + kIpv6) return FrameStatus::truncated;
    const std::uint8_t* outer = frame + l3;
    if ((outer[0] >> 4) != 6) return FrameStatus::bad_header;
    if (outer[6] != kProtoIpip) return FrameStatus::not_udp;
    const std::size_t payload = get16(outer + 4);
    if (length < l3 + kIpv6 + payload) return FrameStatus::truncated;
    // The inner packet must end where the outer payload does (no padding counted as the packet's).
    const FrameStatus inner = parse_ip(frame, l3 + kIpv6 + payload, l3 + kIpv6, kEtherIpv4, out);
    if (inner != FrameStatus::ok) return inner;
    if (payload < kIpv4 || get16(outer + kIpv6 + 2) != payload) return FrameStatus::bad_header;
    out.outer_source = outer + 8;
    out.outer_destination = outer + 24;
    return FrameStatus::ok;
}

}  // namespace xlatperf::xdp
