#include "xdp/encap.hpp"

#include <arpa/inet.h>
#include <cstring>
#include <stdexcept>
#include <sys/socket.h>
#include <vector>

namespace xlatperf::xdp {
namespace {

[[noreturn]] void fail(const std::string& why) { throw std::invalid_argument(why); }

std::uint64_t load64(const std::uint8_t* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

void store64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 7; i >= 0; --i) {
        p[i] = static_cast<std::uint8_t>(v);
        v >>= 8;
    }
}


std::vector<std::string> split(const std::string& text, char by) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (true) {
        const std::size_t next = text.find(by, at);
        out.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
        if (next == std::string::npos) return out;
        at = next + 1;
    }
}

unsigned small_number(const std::string& text, unsigned most, const std::string& what) {
    if (text.empty() || text.size() > 3 || text.find_first_not_of("0123456789") != std::string::npos) {
        fail(what + " must be a number 0.." + std::to_string(most) + ", got '" + text + "'");
    }
    const unsigned value = static_cast<unsigned>(std::stoul(text));
    if (value > most) fail(what + " must be 0.." + std::to_string(most) + ", got " + text);
    return value;
}

// "ADDRESS/LENGTH" of the given family into bytes; host bits must be zero.
void parse_prefix(const std::string& text, int family, std::uint8_t* bytes, unsigned& length, const std::string& what) {
    const std::size_t slash = text.find('/');
    const unsigned most = family == AF_INET ? 32 : 128;
    if (slash == std::string::npos) fail(what + " '" + text + "' needs a /length");
    if (inet_pton(family, text.substr(0, slash).c_str(), bytes) != 1) {
        fail(what + " '" + text + "' is not an " + (family == AF_INET ? "IPv4" : "IPv6") + " prefix");
    }
    length = small_number(text.substr(slash + 1), most, what + " length");
    for (unsigned bit = length; bit < most; ++bit) {
        if ((bytes[bit / 8] >> (7 - bit % 8)) & 1u) fail(what + " '" + text + "' has bits set after its length");
    }
}

std::string ipv4_text(std::uint32_t host) {
    const std::uint32_t net = htonl(host);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &net, text, sizeof text);
    return text;
}

}  // namespace

std::string ipv6_text(const Ipv6& address) {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, address.data(), text, sizeof text);
    return text;
}

std::string rule_text(const EncapRule& r) {
    return ipv6_text(r.ipv6_prefix) + "/" + std::to_string(r.ipv6_length) + "," + ipv4_text(r.ipv4_prefix) + "/" +
           std::to_string(r.ipv4_length) + "," +
           std::to_string(r.kind == EncapKind::map_e ? r.ea_bits : r.psid_length) + "," + std::to_string(r.psid_offset);
}

EncapRule parse_encap_rule(const std::string& mode, const std::string& rule_arg, std::uint64_t ces,
                           std::uint64_t ports_per_ce, const std::string& br) {
    EncapRule r;
    if (mode == "map-e") {
        r.kind = EncapKind::map_e;
    } else if (mode == "lw4o6") {
        r.kind = EncapKind::lw4o6;
    } else {
        fail("--encap must be map-e or lw4o6, got '" + mode + "'");
    }
    const std::string example = r.kind == EncapKind::map_e ? "2001:db8:ce::/51,192.0.2.0/24,13,0"
                                                           : "2001:db8:b4::/64,192.0.2.0/24,5,0";
    const std::vector<std::string> parts = split(rule_arg, ',');
    if (parts.size() != 4) {
        fail("--encap-rule must be IPV6PREFIX,IPV4PREFIX," + std::string(r.kind == EncapKind::map_e ? "EABITS" : "PSIDLEN") +
             ",PSIDOFFSET (example: " + example + "), got '" + rule_arg + "'");
    }
    parse_prefix(parts[0], AF_INET6, r.ipv6_prefix.data(), r.ipv6_length, "--encap-rule IPv6 prefix");
    std::array<std::uint8_t, 4> v4{};
    parse_prefix(parts[1], AF_INET, v4.data(), r.ipv4_length, "--encap-rule IPv4 prefix");
    r.ipv4_prefix = (std::uint32_t{v4[0]} << 24) | (std::uint32_t{v4[1]} << 16) | (std::uint32_t{v4[2]} << 8) | v4[3];
    r.psid_offset = small_number(parts[3], 15, "--encap-rule PSID offset");
    const unsigned suffix_bits = 32 - r.ipv4_length;
    if (r.kind == EncapKind::map_e) {
        r.ea_bits = small_number(parts[2], 48, "--encap-rule EA-bits length");
        if (r.ea_bits < suffix_bits) {
            fail("--encap-rule: " + std::to_string(r.ea_bits) + " EA bits do not cover the " +
                 std::to_string(suffix_bits) + " bits of an IPv4 address under /" + std::to_string(r.ipv4_length) +
                 " (a CE would get an IPv4 prefix, which the tester does not simulate)");
        }
        r.psid_length = r.ea_bits - suffix_bits;
        if (r.ipv6_length + r.ea_bits > 64) {
            fail("--encap-rule: IPv6 prefix /" + std::to_string(r.ipv6_length) + " + " + std::to_string(r.ea_bits) +
                 " EA bits = /" + std::to_string(r.ipv6_length + r.ea_bits) +
                 ", longer than the /64 end-user prefix RFC 7597 allows; use a shorter rule IPv6 prefix (at most /" +
                 std::to_string(64 - r.ea_bits) + ")");
        }
    } else {
        r.psid_length = small_number(parts[2], 16, "--encap-rule PSID length");
        r.ea_bits = suffix_bits + r.psid_length;
        // At most /64: 2^64 interface IDs hold every subscriber count the pool can.
        if (r.ipv6_length > 64) fail("--encap-rule: the lwB4 prefix /" + std::to_string(r.ipv6_length) + " is longer than /64");
    }
    if (r.psid_length + r.psid_offset > 16) {
        fail("--encap-rule: PSID length " + std::to_string(r.psid_length) + " + PSID offset " +
             std::to_string(r.psid_offset) + " is more than the 16 bits of a port");
    }
    const unsigned m = 16 - r.psid_offset - r.psid_length;
    const std::uint64_t set = (r.psid_offset == 0 ? 1u : (1u << r.psid_offset) - 1) * (std::uint64_t{1} << m);
    const std::uint64_t usable = set - (r.psid_offset == 0 ? 1 : 0);
    if (usable == 0) {
        fail("--encap-rule: each CE's port set is the one port PSID (PSID offset 0, 16 PSID bits), and port 0 "
             "cannot be sent from; use fewer PSID bits (a shorter IPv4 prefix or fewer EA bits)");
    }
    const std::uint64_t held = r.ea_bits >= 63 ? ~std::uint64_t{0} : std::uint64_t{1} << r.ea_bits;
    if (ces == 0) fail("--encap-ces must be at least 1");
    if (ces > held && r.kind == EncapKind::map_e) {
        fail("--encap-ces " + std::to_string(ces) + " is more CEs than the rule holds (" + std::to_string(held) +
             ": 2^" + std::to_string(r.ea_bits) + ", " + std::to_string(suffix_bits) + " IPv4 suffix bits + " +
             std::to_string(r.psid_length) + " PSID bits)");
    }
    if (ces > held) {
        fail("--encap-ces " + std::to_string(ces) + " is more subscribers than the IPv4 pool /" +
             std::to_string(r.ipv4_length) + " with " + std::to_string(r.psid_length) + " PSID bits holds (" +
             std::to_string(held) + "); give a larger pool (e.g. 100.64.0.0/10)");
    }
    if (ports_per_ce == 0) ports_per_ce = usable;
    if (ports_per_ce > usable) {
        fail("--encap-ports " + std::to_string(ports_per_ce) + " is more than the " + std::to_string(usable) +
             " ports of a CE's set" + (r.psid_offset == 0 ? " (less port 0's place, PSID offset 0)" : ""));
    }
    r.ports_per_ce = ports_per_ce;
    r.ces = ces;
    if (inet_pton(AF_INET6, br.c_str(), r.br.data()) != 1) {
        fail("--encap-br must be the BR's (lwAFTR's) IPv6 address (example: 2001:db8:6::1), got '" + br + "'");
    }
    return r;
}

CeSpace::CeSpace(const EncapRule& rule) : rule_(rule) {
    m_ = 16 - rule.psid_offset - rule.psid_length;
    set_size_ = (rule.psid_offset == 0 ? 1u : (1u << rule.psid_offset) - 1) * (std::uint64_t{1} << m_);
    prefix_high_ = load64(rule.ipv6_prefix.data());
    prefix_low_ = load64(rule.ipv6_prefix.data() + 8);
    if (rule.ces == 0 || rule.ports_per_ce == 0 || rule.ports_per_ce > set_size_) {
        throw std::invalid_argument("CE space: no CEs, or more ports per CE than a set holds");
    }
}

CeSpace::Ce CeSpace::ce(std::uint64_t number) const {
    const std::uint64_t psid_mask = (std::uint64_t{1} << rule_.psid_length) - 1;
    return Ce{rule_.ipv4_prefix + static_cast<std::uint32_t>(number >> rule_.psid_length),
              static_cast<std::uint16_t>(number & psid_mask)};
}

std::uint32_t CeSpace::last_ipv4() const { return ce(rule_.ces - 1).ipv4; }

std::uint16_t CeSpace::set_port(std::uint16_t psid, std::uint64_t index) const {
    const std::uint64_t block = std::uint64_t{1} << m_;
    const std::uint64_t a_value = (rule_.psid_offset == 0 ? 0 : 1) + index / block;
    const std::uint64_t j = index % block;
    return static_cast<std::uint16_t>((a_value << (16 - rule_.psid_offset)) | (std::uint64_t{psid} << m_) | j);
}

bool CeSpace::port_place(std::uint16_t port, std::uint16_t& psid, std::uint64_t& index) const {
    const std::uint64_t a_value = rule_.psid_offset == 0 ? 0 : port >> (16 - rule_.psid_offset);
    if (rule_.psid_offset != 0 && a_value == 0) return false;
    psid = static_cast<std::uint16_t>((port >> m_) & ((1u << rule_.psid_length) - 1));
    const std::uint64_t j = port & ((std::uint64_t{1} << m_) - 1);
    index = (rule_.psid_offset == 0 ? 0 : (a_value - 1) << m_) + j;
    return true;
}

// Word arithmetic, no bit loop: this runs for every query and every reply.
Ipv6 CeSpace::address(std::uint64_t number) const {
    Ipv6 out{};
    if (rule_.kind == EncapKind::map_e) {
        // The EA bits end at bit ipv6_length + ea_bits <= 64 of the end-user prefix (subnet ID 0).
        const unsigned shift = 64 - rule_.ipv6_length - rule_.ea_bits;
        store64(out.data(), prefix_high_ | (number << shift));
        const Ce c = ce(number);
        store64(out.data() + 8, (std::uint64_t{c.ipv4} << 16) | c.psid);  // 16 zero bits, IPv4, PSID
    } else {
        const std::uint64_t low = prefix_low_ + number + 1;  // interface ID i + 1, added to the prefix
        store64(out.data(), prefix_high_ + (low < prefix_low_ ? 1 : 0));
        store64(out.data() + 8, low);
    }
    return out;
}

CeSpace::Endpoint CeSpace::endpoint(std::uint64_t flow) const {
    Endpoint e;
    e.ce = flow / rule_.ports_per_ce;
    const std::uint64_t t = flow % rule_.ports_per_ce;
    const Ce c = ce(e.ce);
    e.ipv4 = {static_cast<std::uint8_t>(c.ipv4 >> 24), static_cast<std::uint8_t>(c.ipv4 >> 16),
              static_cast<std::uint8_t>(c.ipv4 >> 8), static_cast<std::uint8_t>(c.ipv4)};
    e.port = set_port(c.psid, set_size_ - rule_.ports_per_ce + t);
    e.ipv6 = address(e.ce);
    return e;
}

bool CeSpace::flow_of(const std::uint8_t* ipv4, std::uint16_t port, std::uint64_t& flow, Ipv6& ce_address) const {
    const std::uint32_t host = (std::uint32_t{ipv4[0]} << 24) | (std::uint32_t{ipv4[1]} << 16) |
                               (std::uint32_t{ipv4[2]} << 8) | ipv4[3];
    if (host < rule_.ipv4_prefix) return false;
    const std::uint64_t suffix = host - rule_.ipv4_prefix;
    if (rule_.ipv4_length < 32 ? suffix >> (32 - rule_.ipv4_length) != 0 : suffix != 0) return false;
    std::uint16_t psid = 0;
    std::uint64_t index = 0;
    if (!port_place(port, psid, index)) return false;
    const std::uint64_t number = (suffix << rule_.psid_length) | psid;
    const std::uint64_t first = set_size_ - rule_.ports_per_ce;
    if (number >= rule_.ces || index < first) return false;
    flow = number * rule_.ports_per_ce + (index - first);
    ce_address = address(number);
    return true;
}

}  // namespace xlatperf::xdp
