// The I/O choice (--io, --xdp-*) and the AF_XDP backend's pure parts: which
// flows a plan gives and how many in-flight slots the flow table gets.
#include <catch2/catch.hpp>

#include "io/xdp_io.hpp"
#include "net.hpp"
#include "options.hpp"

using namespace xlatperf;

namespace {

Config xdp_config() {
    Config c;
    c.server = "192.0.2.1";
    c.io = "xdp";
    c.sources = {"192.0.2.2,40000-40099"};
    return c;
}

}  // namespace

TEST_CASE("sockets stay the default I/O") {
    Config c;
    c.server = "127.0.0.1";
    const Plan plan = make_plan(c);
    CHECK_FALSE(plan.xdp);
    CHECK(plan.config.io == "socket");
}

TEST_CASE("xdp I/O plans one flow per source port a socket would have bound") {
    const Plan plan = make_plan(xdp_config());
    CHECK(plan.xdp);
    const std::vector<Source> flows = io::flow_sources(plan);
    REQUIRE(flows.size() == 1);
    REQUIRE(flows[0].ranges.size() == 1);
    // --ports-per-thread 4 (default): the first 4 ports of the range.
    CHECK(flows[0].ranges[0].first == 40000);
    CHECK(flows[0].ranges[0].last == 40003);
    // 1000 q/s x 0.25 s x 2 + 2 batches of 64 = 628 in flight: the 1024-slot floor.
    CHECK(plan.xdp_slots == 1024);
}

TEST_CASE("xdp I/O spreads flows over sources and ranges as sockets are spread") {
    Config c = xdp_config();
    c.sources = {"192.0.2.2,40000-40001,50000-50009", "192.0.2.3,60000-60009"};
    c.ports_per_thread = 7;
    const std::vector<Source> flows = io::flow_sources(make_plan(c));
    REQUIRE(flows.size() == 2);
    REQUIRE(flows[0].ranges.size() == 2);  // 4 ports: 2 of the first range, 2 of the second
    CHECK(flows[0].ranges[1].first == 50000);
    CHECK(flows[0].ranges[1].last == 50001);
    REQUIRE(flows[1].ranges.size() == 1);  // 3 ports
    CHECK(flows[1].ranges[0].last == 60002);
}

TEST_CASE("the flow table never holds more than 65536 queries per flow") {
    CHECK(io::flow_slots(1 << 20, 4) == 1 << 18);
    CHECK(io::flow_slots(1024, 4) == 1024);
    CHECK(io::flow_slots(1 << 20, 3) == 1 << 17);
}

TEST_CASE("xdp I/O refuses what it cannot run, with one line") {
    Config c = xdp_config();
    c.threads = 2;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--threads 1"));
    c = xdp_config();
    c.sources.clear();
    c.bind = "192.0.2.2";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--io xdp needs every source address and its ports"));
    c.first_port = 40000;
    CHECK(make_plan(c).xdp);
    c = xdp_config();
    c.sources.clear();
    c.first_port = 40000;  // no --bind: the wildcard address cannot be a flow's
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--io xdp needs every source address"));
    c = xdp_config();
    c.io = "dpdk";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--io must be socket or xdp"));
    c = xdp_config();
    c.xdp_mode = "offload";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--xdp-mode must be auto, native or generic"));
    c = xdp_config();
    c.xdp_frames = 1000;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--xdp-frames must be a power of two"));
}
