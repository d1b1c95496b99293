#pragma once
// Query frames and reply frames. A query frame is Ethernet (optionally one
// 802.1Q tag) + IPv4 or IPv6 + UDP + the DNS query of QueryTemplate. The whole
// frame is written once into each UMEM frame slot (write_template); a query
// then writes only what varies — the source address and port, the DNS ID, the
// 15 characters of the first label, the 0x20 letters of the epoch — and the
// checksums, computed from sums of the constant part taken once (RFC 1071
// sums add up, so the per-query work is the varying bytes only).
//
// parse_reply() checks a received frame the way the kernel would before a
// socket saw it (lengths, IPv4 header checksum, UDP checksum, no fragments)
// and yields the reply classifier's input: the source address and port, the
// destination (the flow), and the DNS message. Nothing in a frame can make it
// read out of bounds or throw.
//
// With --encap the query is IPv4 inside IPv6 (RFC 2473, next header 4): an
// outer IPv6 header from the CE's address to the BR's goes between the
// Ethernet and the IPv4 headers (no checksum of its own: the per-query work
// adds one 16-byte copy), and parse_encapsulated_reply() checks the outer
// header (version, next header, lengths) before the inner one as above.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "address.hpp"
#include "query.hpp"

namespace xlatperf::xdp {

using Mac = std::array<std::uint8_t, 6>;

struct FrameSpec {
    Mac source_mac{};
    Mac destination_mac{};         // the next hop's
    std::uint16_t vlan = 0;        // 802.1Q VLAN ID; 0: untagged
    SockAddr server;               // destination address and port (the family decides IPv4/IPv6)
    std::uint8_t hop_limit = 64;
    bool encapsulate = false;      // IPv4 in IPv6: the server is IPv4, the outer destination below
    std::array<std::uint8_t, 16> outer_destination{};  // the BR's IPv6 address
};

class FrameTemplate {
public:
    // Keeps a reference to `query`, which must outlive it.
    FrameTemplate(const QueryTemplate& query, const FrameSpec& spec);

    std::size_t size() const { return frame_.size(); }
    int family() const { return family_; }
    // The constant frame (varying fields zero), written once per UMEM slot.
    void write_template(std::uint8_t* frame) const;
    // Writes the varying fields and both checksums into a frame holding the template.
    // `source` is 4 or 16 bytes in network order; `port` in host order.
    // `outer_source`: 16 bytes, the outer IPv6 source of an encapsulating template (else unused).
    void write(std::uint8_t* frame, const std::uint8_t* source, std::uint16_t port, std::uint16_t id,
               std::uint32_t name_address, std::uint64_t epoch, const std::uint8_t* outer_source = nullptr) const;

    std::size_t ip_offset() const { return ip_; }
    std::size_t udp_offset() const { return udp_; }
    std::size_t dns_offset() const { return dns_; }

private:
    const QueryTemplate& query_;
    int family_;
    std::size_t outer_ = 0;  // the outer IPv6 header (encapsulating templates)
    bool encapsulate_ = false;
    std::size_t ip_ = 0, udp_ = 0, dns_ = 0;
    std::size_t address_length_ = 4;
    std::vector<std::uint8_t> frame_;
    std::uint64_t udp_base_sum_ = 0;   // pseudo-header + UDP + DNS, varying bytes taken as zero
    std::uint64_t ip_base_sum_ = 0;    // IPv4 header, source address taken as zero
};

enum class FrameStatus : std::uint8_t {
    ok,
    truncated,     // shorter than its headers or than the lengths they claim
    not_udp,       // not IPv4/IPv6 UDP (ARP, ICMP, extension headers, another EtherType)
    fragment,      // an IPv4 fragment
    bad_header,    // a length or version field that cannot be right
    bad_checksum,  // IPv4 header or UDP checksum wrong (or a zero UDP checksum over IPv6)
};

const char* to_string(FrameStatus status);

struct ParsedReply {
    SockAddr source;                        // the sender's address and port (as recvmsg gives it)
    const std::uint8_t* destination = nullptr;  // 4 or 16 bytes inside the frame
    std::uint16_t destination_port = 0;     // host order
    const std::uint8_t* message = nullptr;  // the UDP payload
    std::size_t length = 0;
    const std::uint8_t* outer_source = nullptr;       // encapsulated replies: 16 bytes inside the frame
    const std::uint8_t* outer_destination = nullptr;
};

FrameStatus parse_reply(const std::uint8_t* frame, std::size_t length, ParsedReply& out);
// An IPv4 reply inside IPv6 (next header 4): not_udp for anything else (a plain IPv4 or IPv6 frame too).
FrameStatus parse_encapsulated_reply(const std::uint8_t* frame, std::size_t length, ParsedReply& out);

// RFC 1071 one's complement sum helpers (exposed for the tests).
std::uint64_t ones_sum(const std::uint8_t* data, std::size_t length, bool odd_start = false);
std::uint16_t fold_complement(std::uint64_t sum);

}  // namespace xlatperf::xdp
