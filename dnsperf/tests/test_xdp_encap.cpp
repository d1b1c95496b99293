// The simulated CEs of --encap (xdp/encap.hpp): the MAP address and port-set
// arithmetic against independent known answers — the reference document 004's
// worked example (Section V: CE 2001:db8:ce:17a9:0:c000:2bd:9 = 192.0.2.189,
// PSID 9, ports 18432-20479) and RFC 7597's Appendix A examples (BMR
// 2001:db8::/40, 192.0.2.0/24, 16 EA bits, PSID offset 6: CE 2001:db8:12:3400::/56
// is 192.0.2.18 PSID 0x34, MAP address 2001:db8:12:3400:0:c000:212:34, port set
// 1232-1235, 2256-2259, ..., 64720-64723) — the lw4o6 binding of the helpers'
// conventions, the flow numbering round trip, the bad rules, and the
// encapsulated query frame read back by the reply parser.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "query.hpp"
#include "xdp/encap.hpp"
#include "xdp/filter_keys.hpp"
#include "xdp/frame.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;

namespace {

Ipv6 v6(const char* text) {
    Ipv6 out{};
    REQUIRE(inet_pton(AF_INET6, text, out.data()) == 1);
    return out;
}

std::uint32_t v4(const char* text) {
    in_addr a{};
    REQUIRE(inet_pton(AF_INET, text, &a) == 1);
    return ntohl(a.s_addr);
}

const char* kPaperRule = "2001:db8:ce::/51,192.0.2.0/24,13,0";
const char* kRfcRule = "2001:db8::/40,192.0.2.0/24,16,6";

std::string refusal(const std::string& mode, const std::string& rule, std::uint64_t ces, std::uint64_t ports = 0,
                    const std::string& br = "2001:db8:6::1") {
    try {
        parse_encap_rule(mode, rule, ces, ports, br);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the reference document's worked example: CE 6057 is 192.0.2.189 PSID 9", "[encap]") {
    const CeSpace space(parse_encap_rule("map-e", kPaperRule, 8192, 0, "2001:db8:6::1"));
    REQUIRE(space.rule().psid_length == 5);
    REQUIRE(space.set_size() == 2048);
    REQUIRE(space.ports_per_ce() == 2047);  // PSID offset 0: one place less, so CE 0 never sends from port 0
    const std::uint64_t number = (189u << 5) | 9u;
    const CeSpace::Ce ce = space.ce(number);
    CHECK(ce.ipv4 == v4("192.0.2.189"));
    CHECK(ce.psid == 9);
    CHECK(space.address(number) == v6("2001:db8:ce:17a9:0:c000:2bd:9"));
    CHECK(space.set_port(9, 0) == 18432);
    CHECK(space.set_port(9, 2047) == 20479);
    std::uint16_t psid = 0;
    std::uint64_t index = 0;
    REQUIRE(space.port_place(20479, psid, index));
    CHECK(psid == 9);
    CHECK(index == 2047);
    // Its flows are its last 2047 ports: 18433 .. 20479.
    CHECK(space.endpoint(number * 2047).port == 18433);
    CHECK(space.endpoint(number * 2047 + 2046).port == 20479);
    const std::uint8_t inner[4] = {192, 0, 2, 189};
    std::uint64_t flow = 0;
    Ipv6 expected{};
    REQUIRE(space.flow_of(inner, 19000, flow, expected));
    CHECK(flow == number * 2047 + (19000 - 18433));
    CHECK(expected == v6("2001:db8:ce:17a9:0:c000:2bd:9"));
    CHECK_FALSE(space.flow_of(inner, 18432, flow, expected));  // the port the tester leaves out
    // The setups' MAP-T CE of NOTES.md: 0x11b = 192.0.2.8 PSID 27, ports 55296-57343.
    CHECK(space.address(0x11b) == v6("2001:db8:ce:11b:0:c000:208:1b"));
    CHECK(space.set_port(27, 0) == 55296);
    CHECK(space.set_port(27, 2047) == 57343);
}

TEST_CASE("RFC 7597 Appendix A: 16 EA bits at PSID offset 6", "[encap]") {
    const CeSpace space(parse_encap_rule("map-e", kRfcRule, 65536, 0, "2001:db8:ffff::1"));
    REQUIRE(space.rule().psid_length == 8);
    REQUIRE(space.set_size() == 63 * 4);  // A = 1 .. 63, 2 bits of j
    REQUIRE(space.ports_per_ce() == 252);
    const std::uint64_t number = 0x1234;
    CHECK(space.ce(number).ipv4 == v4("192.0.2.18"));
    CHECK(space.ce(number).psid == 0x34);
    CHECK(space.address(number) == v6("2001:db8:12:3400:0:c000:212:34"));
    CHECK(space.set_port(0x34, 0) == 1232);
    CHECK(space.set_port(0x34, 3) == 1235);
    CHECK(space.set_port(0x34, 4) == 2256);
    CHECK(space.set_port(0x34, 251) == 64723);
    CHECK(space.set_port(0x34, 248) == 64720);
    // Appendix A example 3 (the BR's direction): 192.0.2.18 port 1232 goes to that MAP address.
    const std::uint8_t inner[4] = {192, 0, 2, 18};
    std::uint64_t flow = 0;
    Ipv6 expected{};
    REQUIRE(space.flow_of(inner, 1232, flow, expected));
    CHECK(expected == v6("2001:db8:12:3400:0:c000:212:34"));
    CHECK(flow == number * 252);
    CHECK_FALSE(space.flow_of(inner, 1000, flow, expected));  // A = 0: the system ports are nobody's
}

TEST_CASE("lw4o6 subscribers: IPv4 pool + (i >> k), PSID i mod 2^k, lwB4 interface ID i + 1", "[encap]") {
    const CeSpace space(parse_encap_rule("lw4o6", "2001:db8:b4::/64,192.0.2.0/24,5,0", 1000, 0, "2001:db8:6::1"));
    CHECK(space.address(0) == v6("2001:db8:b4::1"));
    CHECK(space.ce(0).ipv4 == v4("192.0.2.0"));
    CHECK(space.ce(33).ipv4 == v4("192.0.2.1"));
    CHECK(space.ce(33).psid == 1);
    CHECK(space.address(33) == v6("2001:db8:b4::22"));
    CHECK(space.address(999) == v6("2001:db8:b4::3e8"));
    CHECK(space.last_ipv4() == v4("192.0.2.31"));
    const std::uint8_t inner[4] = {192, 0, 2, 1};
    std::uint64_t flow = 0;
    Ipv6 expected{};
    REQUIRE(space.flow_of(inner, 2048 + 100, flow, expected));
    CHECK(expected == v6("2001:db8:b4::22"));
    const std::uint8_t beyond[4] = {192, 0, 2, 32};  // subscriber 1024 > 999: not of this run
    CHECK_FALSE(space.flow_of(beyond, 2048 + 100, flow, expected));
}

TEST_CASE("every flow maps to a CE address and port and back, at 16 M CEs", "[encap]") {
    // 16 M CEs: EA 24 needs a rule IPv6 prefix of /40 at most; a /16 IPv4 prefix leaves 8 PSID bits.
    const CeSpace space(parse_encap_rule("map-e", "2001:db8::/40,10.0.0.0/16,24,0", 1u << 24, 0, "2001:db8:6::1"));
    REQUIRE(space.flows() == (std::uint64_t{1} << 24) * 255);
    std::mt19937_64 random(7);
    for (int i = 0; i < 20000; ++i) {
        const std::uint64_t flow = random() % space.flows();
        const CeSpace::Endpoint e = space.endpoint(flow);
        REQUIRE(e.port != 0);
        std::uint64_t back = 0;
        Ipv6 expected{};
        REQUIRE(space.flow_of(e.ipv4.data(), e.port, back, expected));
        REQUIRE(back == flow);
        REQUIRE(expected == e.ipv6);
        // The MAP address carries the CE's IPv4 address and PSID (RFC 7597 §5.2).
        REQUIRE(std::memcmp(expected.data() + 10, e.ipv4.data(), 4) == 0);
        REQUIRE(((expected[14] << 8) | expected[15]) == static_cast<int>(space.ce(e.ce).psid));
        REQUIRE(e.port >> 8 == space.ce(e.ce).psid);
    }
    CHECK(sizeof(CeSpace) < 256);  // the CEs take the rule, not a table
}

TEST_CASE("bad rules are refused in one line", "[encap]") {
    CHECK(refusal("map-e", "2001:db8:ce::/51,192.0.2.0/24,20,0", 1000).find("longer than the /64") != std::string::npos);
    CHECK(refusal("map-e", kPaperRule, 8193).find("more CEs than the rule holds (8192") != std::string::npos);
    CHECK(refusal("map-e", "2001:db8:ce::/51,192.0.2.0/24,5,0", 1).find("do not cover") != std::string::npos);
    CHECK(refusal("map-e", "2001:db8::/40,192.0.2.0/24,24,0", 1).find("port 0") != std::string::npos);
    CHECK(refusal("map-e", "2001:db8::/40,192.0.2.0/24,20,6", 1).find("more than the 16 bits") != std::string::npos);
    CHECK(refusal("map-e", "2001:db8:ce::/51,192.0.2.1/24,13,0", 1).find("bits set after") != std::string::npos);
    CHECK(refusal("map-e", "2001:db8:ce::/51,192.0.2.0/24,13", 1).find("IPV6PREFIX,IPV4PREFIX") != std::string::npos);
    CHECK(refusal("map-t", kPaperRule, 1).find("map-e or lw4o6") != std::string::npos);
    CHECK(refusal("map-e", kPaperRule, 1, 2048).find("more than the 2047 ports") != std::string::npos);
    CHECK(refusal("map-e", kPaperRule, 1, 0, "192.0.2.1").find("--encap-br") != std::string::npos);
    CHECK(refusal("lw4o6", "2001:db8:b4::/64,192.0.2.0/24,5,0", 8193).find("more subscribers than the IPv4 pool /24") != std::string::npos);
    for (const std::string& why : {refusal("map-e", "x,y,z,w", 1), refusal("map-e", kPaperRule, 0)}) {
        CHECK(!why.empty());
        CHECK(why.find('\n') == std::string::npos);
    }
}

TEST_CASE("the reply filter keys cover the CEs' IPv4 addresses with the fewest prefixes", "[encap]") {
    const auto keys = ipv4_range_keys(v4("192.0.2.0"), v4("192.0.2.255"));
    REQUIRE(keys.size() == 1);
    CHECK(keys[0].prefixlen == 24);
    CHECK(keys[0].data[0] == 192);
    CHECK(ipv4_range_keys(v4("192.0.2.0"), v4("192.0.2.31")).size() == 1);
    CHECK(ipv4_range_keys(v4("192.0.2.1"), v4("192.0.2.6")).size() == 4);  // /32, /31, /31, /32
    CHECK(ipv4_range_keys(0, 0xffffffffu).size() == 1);
}

TEST_CASE("an encapsulated query frame reads back through the encapsulated reply parser", "[encap]") {
    const QueryTemplate query("dns64perf.test", 28);
    FrameSpec spec;
    spec.source_mac = {0x02, 0, 0, 0, 0, 0x01};
    spec.destination_mac = {0x02, 0, 0, 0, 0, 0x02};
    auto* sin = reinterpret_cast<sockaddr_in*>(&spec.server.storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(53);
    REQUIRE(inet_pton(AF_INET, "198.51.100.2", &sin->sin_addr) == 1);
    spec.server.length = sizeof(sockaddr_in);
    spec.encapsulate = true;
    spec.outer_destination = v6("2001:db8:6::1");
    const FrameTemplate frame(query, spec);
    REQUIRE(frame.size() == 14 + 40 + 20 + 8 + query.size());
    const CeSpace space(parse_encap_rule("map-e", kPaperRule, 8192, 0, "2001:db8:6::1"));
    const CeSpace::Endpoint e = space.endpoint(6057 * 2047 + 5);
    std::vector<std::uint8_t> bytes(frame.size());
    frame.write_template(bytes.data());
    frame.write(bytes.data(), e.ipv4.data(), e.port, 0x1234, 0x0a000007, 0, e.ipv6.data());
    CHECK(bytes[12] == 0x86);
    CHECK(bytes[13] == 0xdd);
    CHECK(bytes[14 + 6] == 4);  // next header IPv4
    ParsedReply out;
    REQUIRE(parse_encapsulated_reply(bytes.data(), bytes.size(), out) == FrameStatus::ok);
    CHECK(std::memcmp(out.outer_source, v6("2001:db8:ce:17a9:0:c000:2bd:9").data(), 16) == 0);
    CHECK(std::memcmp(out.outer_destination, spec.outer_destination.data(), 16) == 0);
    CHECK(std::memcmp(out.destination, "\xc6\x33\x64\x02", 4) == 0);  // inner destination: the server
    CHECK(reinterpret_cast<const sockaddr_in*>(&out.source.storage)->sin_addr.s_addr == htonl(v4("192.0.2.189")));
    CHECK(out.length == query.size());
    // The plain parser does not take it, nor the encapsulated parser a plain frame.
    CHECK(parse_reply(bytes.data(), bytes.size(), out) == FrameStatus::not_udp);
    SECTION("damaged frames are told apart") {
        auto bad = bytes;
        bad[14 + 6] = 41;
        CHECK(parse_encapsulated_reply(bad.data(), bad.size(), out) == FrameStatus::not_udp);
        bad = bytes;
        bad[bad.size() - 1] ^= 1;  // the inner UDP checksum no longer holds
        CHECK(parse_encapsulated_reply(bad.data(), bad.size(), out) == FrameStatus::bad_checksum);
        bad = bytes;
        bad[14 + 40 + 10] ^= 1;  // the inner IPv4 header checksum
        CHECK(parse_encapsulated_reply(bad.data(), bad.size(), out) == FrameStatus::bad_checksum);
        CHECK(parse_encapsulated_reply(bytes.data(), bytes.size() - 1, out) == FrameStatus::truncated);
        bad = bytes;
        bad[14 + 5] += 2;  // outer payload longer than the inner packet
        bad.resize(bad.size() + 2);
        CHECK(parse_encapsulated_reply(bad.data(), bad.size(), out) == FrameStatus::bad_header);
        bad = bytes;
        bad[14] = 0x40;
        CHECK(parse_encapsulated_reply(bad.data(), bad.size(), out) == FrameStatus::bad_header);
    }
}
