#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "options.hpp"
#include "sources.hpp"

using namespace xlatperf;

namespace {

Config with_sources(std::vector<std::string> sources, unsigned threads, unsigned ports) {
    Config c;
    c.server = "192.0.2.1";
    c.rate_qps = 1000;
    c.threads = threads;
    c.ports_per_thread = ports;
    c.sources = std::move(sources);
    return c;
}

}  // namespace

TEST_CASE("a --source value is an address and port ranges in increasing order") {
    const Source s = parse_source("2001:db8:ce:11b:0:c000:208:1b,55296-57343,60000");
    CHECK(s.text == "2001:db8:ce:11b:0:c000:208:1b");
    CHECK(s.address.family() == AF_INET6);
    REQUIRE(s.ranges.size() == 2);
    CHECK((s.ranges[0].first == 55296 && s.ranges[0].last == 57343));
    CHECK((s.ranges[1].first == 60000 && s.ranges[1].last == 60000));
    CHECK(s.port_count() == 2049);
    CHECK(source_text(s) == "2001:db8:ce:11b:0:c000:208:1b,55296-57343,60000");
    CHECK(parse_source("192.0.2.8").ranges.empty());
}

TEST_CASE("a bad --source is refused naming it") {
    for (const char* bad : {"", ",1-2", "foo", "192.0.2.8,", "192.0.2.8,0", "192.0.2.8,70000", "192.0.2.8,9-5",
                            "192.0.2.8,1-x", "192.0.2.8,100-200,150", "192.0.2.8,100-200,50-60", "[::1]"}) {
        INFO(bad);
        CHECK_THROWS_AS(parse_source(bad), OptionError);
    }
    CHECK_THROWS_WITH(parse_source("192.0.2.8,9-5"), Catch::Contains("'192.0.2.8,9-5'") && Catch::Contains("FIRST <= LAST"));
}

TEST_CASE("thread i socket j sends from source (i*K + j) mod S, each source's ports in order") {
    const Plan plan = make_plan(with_sources({"192.0.2.8,100-101,200-201", "192.0.2.9,300-303", "192.0.2.10,400-403"}, 3, 3));
    // sockets 0..8: sources 0,1,2,0,1,2,0,1,2; source 0 takes 100, 101, 200.
    const std::vector<std::pair<std::size_t, std::uint16_t>> want = {
        {0, 100}, {1, 300}, {2, 400}, {0, 101}, {1, 301}, {2, 401}, {0, 200}, {1, 302}, {2, 402}};
    for (unsigned i = 0; i < 3; ++i) {
        for (unsigned j = 0; j < 3; ++j) {
            const SocketSource got = socket_source(plan, i, j);
            INFO("thread " << i << " socket " << j);
            CHECK(got.source == want[i * 3 + j].first);
            CHECK(got.port == want[i * 3 + j].second);
        }
    }
    CHECK(plan.sources[0].sockets == 3);
    CHECK(plan.sources_given);
}

TEST_CASE("every socket gets a distinct address:port and the counts per source add up") {
    const Plan plan = make_plan(with_sources({"192.0.2.8,1000-1010", "192.0.2.9,2000-2010", "192.0.2.10,3000-3010"}, 4, 7));
    std::set<std::pair<std::size_t, std::uint16_t>> seen;
    std::vector<std::uint64_t> per_source(3, 0);
    for (unsigned i = 0; i < 4; ++i) {
        for (unsigned j = 0; j < 7; ++j) {
            const SocketSource s = socket_source(plan, i, j);
            seen.insert({s.source, s.port});
            ++per_source[s.source];
            const PortRange r = plan.sources[s.source].ranges.front();
            CHECK((s.port >= r.first && s.port <= r.last));
        }
    }
    CHECK(seen.size() == 28);
    for (std::size_t k = 0; k < 3; ++k) CHECK(per_source[k] == plan.sources[k].sockets);
    CHECK(sockets_of_source(28, 3, 0) == 10);
    CHECK(sockets_of_source(28, 3, 2) == 9);
}

TEST_CASE("bind and first port alone still make one source on consecutive ports") {
    Config c = with_sources({}, 2, 4);
    c.bind = "192.0.2.8";
    c.first_port = 55296;
    const Plan plan = make_plan(c);
    REQUIRE(plan.sources.size() == 1);
    CHECK_FALSE(plan.sources_given);
    CHECK(plan.sources[0].text == "192.0.2.8");
    CHECK(socket_source(plan, 1, 3).port == 55296 + 7);
    c.first_port = 0;
    CHECK(socket_source(make_plan(c), 1, 3).port == 0);
}

TEST_CASE("sources that cannot hold the sockets, or mix families, are refused with the fix") {
    CHECK_THROWS_WITH(make_plan(with_sources({"192.0.2.8,100-101", "192.0.2.9,200-210"}, 2, 4)),
                      Catch::Contains("put 4 on --source 192.0.2.8,100-101, which has only 2 ports"));
    CHECK_THROWS_WITH(make_plan(with_sources({"192.0.2.8", "2001:db8::1"}, 1, 4)),
                      Catch::Contains("different IP versions"));
    CHECK_THROWS_WITH(make_plan(with_sources({"192.0.2.8", "192.0.2.9"}, 1, 1)),
                      Catch::Contains("every source needs one"));
    CHECK_THROWS_WITH(make_plan(with_sources({"192.0.2.8,1-9", "192.0.2.8,20-29"}, 1, 4)),
                      Catch::Contains("given twice"));
    Config c = with_sources({"192.0.2.8,100-200"}, 1, 4);
    c.first_port = 100;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--source replaces --bind and --first-port"));
}

TEST_CASE("the source option is repeatable on the command line, one value each") {
    const char* argv[] = {"xlatperf", "--server", "192.0.2.1", "--source", "192.0.2.8,100-199",
                          "--source", "192.0.2.9,200-299"};
    std::ostringstream out, err;
    const CommandLine cl = parse_command_line(7, argv, out, err);
    REQUIRE(cl.plan);
    CHECK(cl.plan->sources.size() == 2);
    CHECK(cl.plan->sources[1].text == "192.0.2.9");
}

TEST_CASE("a --source address range is one source per address, each with the same ports") {
    const std::vector<Source> v4 = parse_sources("198.18.0.1-198.18.0.16,1024-63523");
    REQUIRE(v4.size() == 16);
    CHECK(v4.front().text == "198.18.0.1");
    CHECK(v4[9].text == "198.18.0.10");
    CHECK(v4.back().text == "198.18.0.16");
    for (const Source& s : v4) {
        REQUIRE(s.ranges.size() == 1);
        CHECK((s.ranges[0].first == 1024 && s.ranges[0].last == 63523));
    }
    // Carries across octets (and IPv6 groups); a one-address range is that address.
    const std::vector<Source> carry = parse_sources("192.0.2.255-192.0.3.1");
    REQUIRE(carry.size() == 3);
    CHECK(carry[1].text == "192.0.3.0");
    CHECK(carry[2].ranges.empty());
    const std::vector<Source> v6 = parse_sources("2001:db8::ffff-2001:db8::1:1,5000-5009,6000");
    REQUIRE(v6.size() == 3);
    CHECK(v6[1].text == "2001:db8::1:0");
    CHECK(v6[2].port_count() == 11);
    CHECK(parse_sources("192.0.2.7-192.0.2.7,53").size() == 1);
    CHECK(parse_sources("192.0.2.7,53").size() == 1);
}

TEST_CASE("a bad --source address range is refused naming it") {
    for (const char* bad : {"192.0.2.9-192.0.2.8", "192.0.2.1-2001:db8::1", "192.0.2.1-", "-192.0.2.1",
                            "192.0.2.1-x,100", "10.0.0.0-10.1.0.0,100", "192.0.2.1-192.0.2.2,9-5"}) {
        INFO(bad);
        CHECK_THROWS_AS(parse_sources(bad), OptionError);
    }
    CHECK_THROWS_WITH(parse_sources("192.0.2.9-192.0.2.8,100"), Catch::Contains("FIRST <= LAST"));
    CHECK_THROWS_WITH(parse_sources("10.0.0.0-10.1.0.0"), Catch::Contains("more than 4096 addresses"));
    // An address of the range given again on its own is a duplicate, as for single addresses.
    CHECK_THROWS_WITH(make_plan(with_sources({"192.0.2.8-192.0.2.10,100-199", "192.0.2.9,300"}, 1, 4)),
                      Catch::Contains("given twice"));
}

TEST_CASE("an address range deals sockets round-robin like the addresses listed one by one") {
    const Plan ranged = make_plan(with_sources({"192.0.2.8-192.0.2.10,100-103"}, 2, 3));
    const Plan listed = make_plan(with_sources({"192.0.2.8,100-103", "192.0.2.9,100-103", "192.0.2.10,100-103"}, 2, 3));
    REQUIRE(ranged.sources.size() == 3);
    for (unsigned t = 0; t < 2; ++t) {
        for (unsigned k = 0; k < 3; ++k) {
            const SocketSource a = socket_source(ranged, t, k), b = socket_source(listed, t, k);
            CHECK((a.source == b.source && a.port == b.port));
        }
    }
    CHECK(ranged.sources[2].sockets == 2);
}
