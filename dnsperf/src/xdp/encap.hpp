#pragma once
// The simulated CEs of --encap (MAP-E, RFC 7597; lw4o6, RFC 7596): what each
// CE's addresses and port set are, computed from its number, so that a run of
// 16 M CEs keeps no per-CE table (memory independent of the CE count).
//
// CE number i (0-based) has EA-bits value i (MAP-E) or is subscriber i (lw4o6):
// its IPv4 address is the rule's IPv4 prefix + (i >> k) and its PSID i & (2^k - 1),
// k the PSID length (MAP-E: EA-bits length - (32 - IPv4 prefix length)). Its
// port set (RFC 7597 §5.1, PSID offset a, m = 16 - a - k) is every port
// (A << (16 - a)) | (PSID << m) | j with A in 1 .. 2^a - 1 (a = 0: A = 0 only)
// and j in 0 .. 2^m - 1, in increasing order. The tester sends from the last
// P ports of each set (P: --encap-ports; default the whole set, less one when
// a = 0, so that no CE sends from port 0): flows = CEs × P, flow f = CE f / P,
// the (f mod P)-th of its P ports.
//
// Its IPv6 address (the outer source of its queries, the outer destination of
// its replies): MAP-E the MAP address (§5.2: end-user prefix = rule IPv6
// prefix + EA bits, padded to /64; interface ID 16 bits 0, 32 bits IPv4
// address, 16 bits PSID); lw4o6 the lwB4 address, the rule's IPv6 prefix with
// interface ID i + 1 (docs/tester.md, conventions of helpers' ENCAP.md).
// Nothing here touches the kernel: the unit tests check the arithmetic.

#include <array>
#include <cstdint>
#include <string>

namespace xlatperf::xdp {

enum class EncapKind : std::uint8_t { map_e, lw4o6 };

using Ipv6 = std::array<std::uint8_t, 16>;

struct EncapRule {
    EncapKind kind = EncapKind::map_e;
    Ipv6 ipv6_prefix{};             // MAP-E: rule IPv6 prefix; lw4o6: the lwB4s' prefix
    unsigned ipv6_length = 0;
    std::uint32_t ipv4_prefix = 0;  // host order: MAP-E rule IPv4 prefix; lw4o6 the IPv4 pool
    unsigned ipv4_length = 0;
    unsigned ea_bits = 0;           // MAP-E EA-bits length (lw4o6: IPv4 suffix bits + PSID length)
    unsigned psid_length = 0;       // k
    unsigned psid_offset = 0;       // a
    std::uint64_t ces = 0;          // CEs simulated: 0 .. ces - 1
    std::uint64_t ports_per_ce = 0; // P: ports each CE sends from (the last P of its set)
    Ipv6 br{};                      // the BR's (lwAFTR's) IPv6 address
};

// Parses and checks a rule: `mode` map-e or lw4o6, `rule` "IPV6PREFIX,IPV4PREFIX,BITS,OFFSET" (BITS: EA-bits
// length for MAP-E, PSID length for lw4o6), the CE count, the ports per CE (0: the whole set) and the BR.
// Throws std::invalid_argument with a one-line reason (EA bits that do not fit, more CEs than the rule holds...).
EncapRule parse_encap_rule(const std::string& mode, const std::string& rule, std::uint64_t ces,
                           std::uint64_t ports_per_ce, const std::string& br);

// A rule's text as the JSON gives it ("2001:db8:ce::/51,192.0.2.0/24,13,0").
std::string rule_text(const EncapRule& rule);
std::string ipv6_text(const Ipv6& address);

class CeSpace {
public:
    explicit CeSpace(const EncapRule& rule);

    const EncapRule& rule() const { return rule_; }
    std::uint64_t ces() const { return rule_.ces; }
    std::uint64_t ports_per_ce() const { return rule_.ports_per_ce; }
    std::uint64_t flows() const { return rule_.ces * rule_.ports_per_ce; }
    std::uint64_t set_size() const { return set_size_; }  // ports in one CE's set

    struct Ce {
        std::uint32_t ipv4 = 0;  // host order
        std::uint16_t psid = 0;
    };
    Ce ce(std::uint64_t number) const;
    // The index-th port (0 .. set_size - 1) of a PSID's set, increasing.
    std::uint16_t set_port(std::uint16_t psid, std::uint64_t index) const;
    // A port's PSID and index in its set; false when the port is in no set (A = 0 with a > 0).
    bool port_place(std::uint16_t port, std::uint16_t& psid, std::uint64_t& index) const;
    // The CE's IPv6 address (MAP address or lwB4 address).
    Ipv6 address(std::uint64_t number) const;

    struct Endpoint {
        std::array<std::uint8_t, 4> ipv4{};  // network order
        std::uint16_t port = 0;              // host order
        Ipv6 ipv6{};
        std::uint64_t ce = 0;
    };
    Endpoint endpoint(std::uint64_t flow) const;
    // A reply's inner destination (4 bytes, network order) and port -> its flow and the CE's IPv6
    // address (where the BR must have sent it); false when no flow of this run has them.
    bool flow_of(const std::uint8_t* ipv4, std::uint16_t port, std::uint64_t& flow, Ipv6& ce_address) const;
    // The IPv4 addresses the CEs use: first .. last, host order.
    std::uint32_t first_ipv4() const { return rule_.ipv4_prefix; }
    std::uint32_t last_ipv4() const;

private:
    EncapRule rule_;
    unsigned m_ = 0;                 // 16 - a - k
    std::uint64_t set_size_ = 0;
    std::uint64_t prefix_high_ = 0;  // the rule IPv6 prefix's first and last 64 bits
    std::uint64_t prefix_low_ = 0;
};

}  // namespace xlatperf::xdp
