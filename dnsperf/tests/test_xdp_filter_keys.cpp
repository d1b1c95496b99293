// The reply filter's prefix trie keys: each port range becomes the fewest
// aligned port blocks that cover it exactly, and a longest-prefix match over
// the keys (done here by hand, as the kernel's trie would) takes exactly the
// (address, port) pairs of the sources and nothing else.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_sources.hpp"
#include "xdp/filter_keys.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;

namespace {

// Whether the first `bits` bits of a and b agree.
bool same_bits(const std::uint8_t* a, const std::uint8_t* b, std::uint32_t bits) {
    for (std::uint32_t i = 0; i < bits; ++i) {
        const int shift = 7 - static_cast<int>(i % 8);
        if (((a[i / 8] >> shift) & 1) != ((b[i / 8] >> shift) & 1)) return false;
    }
    return true;
}

// What the kernel's LPM trie answers: some stored key is a prefix of the looked-up one.
bool matches(const std::vector<xlb_key>& keys, const xlb_key& wanted) {
    for (const xlb_key& k : keys) {
        if (k.prefixlen <= wanted.prefixlen && same_bits(k.data, wanted.data, k.prefixlen)) return true;
    }
    return false;
}

std::vector<std::uint8_t> v4(const char* text) {
    std::vector<std::uint8_t> out(4);
    REQUIRE(inet_pton(AF_INET, text, out.data()) == 1);
    return out;
}

}  // namespace

TEST_CASE("a port range is the fewest aligned blocks that cover it exactly", "[xdp_filter]") {
    CHECK(port_prefixes(1, 65535).size() == 16);
    CHECK(port_prefixes(0, 65535).size() == 1);
    CHECK(port_prefixes(0, 65535)[0].bits == 0);
    CHECK(port_prefixes(20000, 20000).size() == 1);
    CHECK(port_prefixes(20000, 20000)[0].bits == 16);
    // 30000 is a multiple of 16: 30000-30003 (a block of 4) and 30004.
    const std::vector<PortPrefix> two = port_prefixes(30000, 30004);
    REQUIRE(two.size() == 2);
    CHECK((two[0].first == 30000 && two[0].bits == 14));
    CHECK((two[1].first == 30004 && two[1].bits == 16));
    // A MAP-T CE's port set of the paper (PSID 27, offset 0): one aligned block of 2 048.
    CHECK(port_prefixes(55296, 57343).size() == 1);
    // Every range with both ends in a window: blocks aligned, disjoint, in order, covering it, at most 30.
    for (std::uint32_t first = 1; first < 300; first += 7) {
        for (std::uint32_t last = first; last < 70000 && last <= 65535; last = last * 3 / 2 + 1) {
            const std::vector<PortPrefix> blocks = port_prefixes(static_cast<std::uint16_t>(first),
                                                                 static_cast<std::uint16_t>(last));
            REQUIRE(blocks.size() <= 30);
            std::uint32_t at = first;
            for (const PortPrefix& b : blocks) {
                const std::uint32_t size = 1u << (16 - b.bits);
                REQUIRE(b.first == at);
                REQUIRE(b.first % size == 0);
                at += size;
            }
            REQUIRE(at == last + 1);
        }
    }
}

TEST_CASE("a longest-prefix match over the keys takes exactly the sources' pairs", "[xdp_filter]") {
    const std::vector<Source> sources = {test_source("198.19.0.1", {{30000, 30004}, {30010, 30014}}),
                                         test_source("198.19.0.2", {{1024, 63523}}),
                                         test_source("198.19.0.4", {})};
    const std::vector<xlb_key> keys = filter_keys(sources);
    CHECK(keys.size() == 2 + 3 + port_prefixes(1024, 63523).size() + 16);
    const std::vector<std::uint8_t> one = v4("198.19.0.1"), two = v4("198.19.0.2"), three = v4("198.19.0.3"),
                                    four = v4("198.19.0.4");
    for (std::uint32_t port = 0; port <= 65535; ++port) {
        const auto p = static_cast<std::uint16_t>(port);
        const bool in_one = (port >= 30000 && port <= 30004) || (port >= 30010 && port <= 30014);
        REQUIRE(matches(keys, lookup_key(one.data(), 4, p)) == in_one);
        REQUIRE(matches(keys, lookup_key(two.data(), 4, p)) == (port >= 1024 && port <= 63523));
        REQUIRE_FALSE(matches(keys, lookup_key(three.data(), 4, p)));
        REQUIRE(matches(keys, lookup_key(four.data(), 4, p)) == (port >= 1));
    }
}

TEST_CASE("IPv6 keys put the port after the 16 address bytes", "[xdp_filter]") {
    const std::vector<xlb_key> keys = filter_keys({test_source("fd00:78::5", {{55296, 57343}})});
    REQUIRE(keys.size() == 1);
    CHECK(keys[0].prefixlen == 128 + 5);
    std::uint8_t address[16];
    REQUIRE(inet_pton(AF_INET6, "fd00:78::5", address) == 1);
    CHECK(matches(keys, lookup_key(address, 16, 55296)));
    CHECK(matches(keys, lookup_key(address, 16, 57343)));
    CHECK_FALSE(matches(keys, lookup_key(address, 16, 57344)));
    CHECK_FALSE(matches(keys, lookup_key(address, 16, 55295)));
    address[15] = 6;
    CHECK_FALSE(matches(keys, lookup_key(address, 16, 55296)));
}
