// The I/O choice (--io, --xdp-*) and the AF_XDP backend's pure parts: which
// flows a plan gives and how many in-flight slots the flow table gets.
#include <catch2/catch.hpp>

#include "io/xdp_io.hpp"
#include "xdp/flows.hpp"
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
    // 1000 q/s x 0.25 s = 250 in flight; 2 x 250 + 2 batches of 64 = 628: 1024 slots.
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

TEST_CASE("xdp I/O binds one queue per thread pair") {
    Config c = xdp_config();
    CHECK(make_plan(c).xdp_queues == std::vector<std::uint32_t>{0});
    c.threads = 2;
    CHECK(make_plan(c).xdp_queues == std::vector<std::uint32_t>{0, 1});
    c.xdp_queue = 3;
    CHECK(make_plan(c).xdp_queues == std::vector<std::uint32_t>{3, 4});
    c.xdp_queue = 63;  // 63 and 64: the reply filter's XSK map holds queues 0..63
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("binds queues up to 64") && Catch::Contains("0..63"));
    c.xdp_queue = 0;
    c.xdp_queues = "0,2";
    CHECK(make_plan(c).xdp_queues == std::vector<std::uint32_t>{0, 2});
    c.xdp_queues = "0-2";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("names 3 queues for --threads 2"));
    c.xdp_queues = "1,64";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("queue 64 is beyond"));
    c.xdp_queues = "1,1";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--xdp-queues 1,1"));
}

TEST_CASE("xdp I/O refuses what it cannot run, with one line") {
    Config c = xdp_config();
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

TEST_CASE("xdp I/O takes a million flows from an address range, with no per-flow state") {
    Config c = xdp_config();
    c.sources = {"198.19.0.1-198.19.0.16,1024-63523"};
    c.ports_per_thread = 1'000'000;
    c.rate_qps = 100'000;
    const Plan plan = make_plan(c);
    const std::vector<Source> sources = io::flow_sources(plan);
    REQUIRE(sources.size() == 16);
    for (const Source& s : sources) CHECK(s.port_count() == 62'500);
    const xdp::FlowSpace flows(sources, xdp::FlowOrder::sequential, 1);
    CHECK(flows.size() == 1'000'000);
    CHECK(flows.memory_bytes() < 16 * 1024);  // per source, not per flow
    // 100 000 q/s x 0.25 s = 25 000 in flight: 2 x 25 000 + 128 -> 65 536 slots of 16 B = 1 MiB, 41.9 B each.
    CHECK(plan.xdp_in_flight == 25'000);
    CHECK(plan.xdp_slots == 65'536);
    CHECK(static_cast<double>(plan.xdp_slots * xdp::kFlowSlotBytes) / static_cast<double>(plan.xdp_in_flight) <= 64);
    CHECK(plan.prealloc_bytes < 64u << 20);
}

TEST_CASE("the flow table is at most 64 B per query in flight plus 64 B per query of a batch") {
    for (const double rate : {100.0, 1000.0, 33'333.0, 65'536.0 * 4, 1'000'000.0, 3'000'000.0}) {
        Config c = xdp_config();
        c.rate_qps = rate;
        c.ports_per_thread = 100;
        const Plan plan = make_plan(c);
        INFO(rate);
        CHECK(plan.xdp_slots * xdp::kFlowSlotBytes <= 64 * plan.xdp_in_flight + 64 * c.batch);
        CHECK(plan.xdp_slots >= 2 * plan.xdp_in_flight + 2 * c.batch);
    }
}

TEST_CASE("the flow order and its seed are planned, and refused without --io xdp") {
    Config c = xdp_config();
    const Plan drawn = make_plan(c);
    CHECK_FALSE(drawn.flow_pseudorandom);
    CHECK(drawn.flow_seed != 0);  // drawn, so the JSON can name it
    c.flow_order = "pseudorandom";
    c.flow_seed = 4814;
    const Plan keyed = make_plan(c);
    CHECK(keyed.flow_pseudorandom);
    CHECK(keyed.flow_seed == 4814);
    c.flow_order = "random";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--flow-order must be sequential or pseudorandom"));
    Config sockets;
    sockets.server = "127.0.0.1";
    sockets.flow_order = "pseudorandom";
    CHECK_THROWS_WITH(make_plan(sockets), Catch::Contains("add --io xdp"));
    sockets.flow_order = "sequential";
    sockets.flow_seed = 7;
    CHECK_THROWS_WITH(make_plan(sockets), Catch::Contains("add --io xdp"));
}

TEST_CASE("flows beyond 65535 per thread only with --io xdp, from any number of (address, port range) pairs") {
    Config c = xdp_config();
    c.sources = {"192.0.2.2,1024-65535", "192.0.2.3,1024-65535"};
    c.ports_per_thread = 100'000;
    CHECK(make_plan(c).xdp);
    c.io = "socket";
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--ports-per-thread must be 1..65535"));
    c = xdp_config();
    c.ports_per_thread = (1u << 24) + 1;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("1..16777216 with --io xdp"));
    // 4 096 addresses with two ranges each: 8 192 (address, port range) pairs (the filter once held 64).
    c = xdp_config();
    c.sources = {"10.1.0.0-10.1.15.255,1000-1049,2000-2049"};
    c.ports_per_thread = 4096 * 100;
    CHECK(make_plan(c).xdp);
}

TEST_CASE("The VLAN option is an 802.1Q ID for --io xdp frames only") {
    Config c = xdp_config();
    c.vlan = 100;
    CHECK(make_plan(c).config.vlan == 100);
    c.vlan = 4095;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--vlan must be a VLAN ID 1..4094"));
    Config sockets;
    sockets.server = "127.0.0.1";
    sockets.vlan = 100;
    CHECK_THROWS_WITH(make_plan(sockets), Catch::Contains("with sockets send through a VLAN interface"));
}
