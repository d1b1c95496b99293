// Flows without sockets: the pseudorandom order is a permutation with an
// inverse, flows map to (address, port) and back, and the matching state tells
// a flow's queries apart by ID and epoch in bounded memory.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_sources.hpp"
#include "xdp/flows.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;

TEST_CASE("the pseudorandom flow order visits every flow once per round and inverts", "[xdp_flows]") {
    for (std::uint64_t size : {1ull, 2ull, 7ull, 1000ull, 65537ull, 300000ull}) {
        const FlowPermutation p(size, FlowOrder::pseudorandom, 42);
        std::vector<bool> seen(size, false);
        std::uint64_t in_place = 0;
        for (std::uint64_t j = 0; j < size; ++j) {
            const std::uint64_t f = p.forward(j);
            REQUIRE(f < size);
            REQUIRE_FALSE(seen[f]);
            seen[f] = true;
            REQUIRE(p.inverse(f) == j);
            in_place += f == j ? 1 : 0;
        }
        if (size >= 1000) CHECK(in_place < size / 100);  // shuffled, not the identity
    }
    const FlowPermutation sequential(10, FlowOrder::sequential, 42);
    CHECK((sequential.forward(3) == 3 && sequential.inverse(3) == 3));
}

TEST_CASE("the pseudorandom order over a million and more flows is a permutation with its inverse", "[xdp_flows]") {
    for (std::uint64_t size : {1'000'000ull, (1ull << 22) + 3}) {
        INFO(size);
        const FlowPermutation p(size, FlowOrder::pseudorandom, 0x4814);
        std::vector<bool> seen(size, false);
        std::uint64_t in_place = 0, wrong_inverse = 0, out_of_range = 0, twice = 0;
        for (std::uint64_t j = 0; j < size; ++j) {
            const std::uint64_t f = p.forward(j);
            if (f >= size) {
                ++out_of_range;
                continue;
            }
            twice += seen[f] ? 1 : 0;
            seen[f] = true;
            wrong_inverse += p.inverse(f) != j ? 1 : 0;
            in_place += f == j ? 1 : 0;
        }
        CHECK(out_of_range == 0);
        CHECK(twice == 0);
        CHECK(wrong_inverse == 0);
        CHECK(in_place < size / 1000);
        // Another seed, another order.
        const FlowPermutation q(size, FlowOrder::pseudorandom, 0x4815);
        std::uint64_t same = 0;
        for (std::uint64_t j = 0; j < 10'000; ++j) same += p.forward(j) == q.forward(j) ? 1 : 0;
        CHECK(same < 10);
    }
}

TEST_CASE("a million flows over 16 addresses: every (address, port) once per round, and back", "[xdp_flows]") {
    std::vector<Source> sources;
    for (int a = 1; a <= 16; ++a) sources.push_back(test_source(("198.19.0." + std::to_string(a)).c_str(), {{1024, 63523}}));
    for (const FlowOrder order : {FlowOrder::sequential, FlowOrder::pseudorandom}) {
        const FlowSpace flows(sources, order, 99);
        REQUIRE(flows.size() == 1'000'000);
        std::vector<bool> seen(flows.size(), false);
        std::uint64_t twice = 0, unmapped = 0;
        for (std::uint64_t position = 0; position < flows.size(); ++position) {
            const std::uint64_t flow = flows.permutation().forward(position);
            const auto e = flows.endpoint(flow);
            const std::uint64_t key = (e.address[3] - 1u) * 62'500ull + (e.port - 1024u);
            twice += seen[key] ? 1 : 0;
            seen[key] = true;
            std::uint64_t back = 0;
            if (!flows.flow_of(e.address, e.port, back) || flows.permutation().inverse(back) != position) ++unmapped;
        }
        CHECK(twice == 0);
        CHECK(unmapped == 0);
    }
}

TEST_CASE("flows are addresses x port ranges and map back", "[xdp_flows]") {
    const FlowSpace flows({test_source("192.0.2.1", {{1000, 1009}, {2000, 2004}}), test_source("192.0.2.2", {{3000, 3099}})},
                          FlowOrder::sequential, 1);
    REQUIRE(flows.size() == 115);
    for (std::uint64_t f = 0; f < flows.size(); ++f) {
        const auto e = flows.endpoint(f);
        std::uint64_t back = 999;
        REQUIRE(flows.flow_of(e.address, e.port, back));
        REQUIRE(back == f);
    }
    CHECK(flows.endpoint(10).port == 2000);
    CHECK(flows.endpoint(15).port == 3000);
    std::uint64_t f = 0;
    const std::uint8_t other[4] = {192, 0, 2, 3};
    CHECK_FALSE(flows.flow_of(other, 1000, f));
    CHECK_FALSE(flows.flow_of(flows.endpoint(0).address, 1010, f));
    CHECK_THROWS_WITH(FlowSpace({test_source("192.0.2.1", {})}, FlowOrder::sequential, 1),
                      Catch::Contains("no port range"));
}

TEST_CASE("the matching state finds a flow's query by ID and keeps wrapped IDs apart", "[xdp_flows]") {
    const std::uint64_t flows = 4;
    FlowTable table(flows, 1024);
    CHECK(table.bytes() == 1024 * kFlowSlotBytes);
    const std::int64_t timeout = 1'000'000;
    for (std::uint64_t k = 0; k < 40; ++k) CHECK_FALSE(table.publish(k, static_cast<std::int64_t>(k), timeout));
    // Query 37: flow position 1, that flow's query 9, ID 9.
    REQUIRE(table.position(37) == 1);
    REQUIRE(table.sequence(37) == 9);
    auto view = table.view(1);
    FlowTable::Snapshot s;
    REQUIRE(view.find(9, s) == FlowTable::Lookup::outstanding);
    CHECK((s.query_index == 37 && s.sent_ns == 37 && s.sequence() == 9));
    CHECK(view.mark_answered(s));
    CHECK(view.find(9, s) == FlowTable::Lookup::answered);
    CHECK_FALSE(view.mark_answered(s));
    CHECK(view.find(10, s) == FlowTable::Lookup::unknown);  // flow 1's query 10 is not sent yet
    CHECK(table.view(3).find(9, s) == FlowTable::Lookup::outstanding);

    SECTION("after the ID wraps, the old query is gone and the new one has epoch 1") {
        FlowTable wrap(1, 1024);
        for (std::uint64_t k = 0; k <= 65536 + 5; ++k) wrap.publish(k, static_cast<std::int64_t>(k), 0);
        auto v = wrap.view(0);
        REQUIRE(v.find(5, s) == FlowTable::Lookup::outstanding);
        CHECK((s.query_index == 65536 + 5 && (s.sequence() >> 16) == 1));
        CHECK(v.find(6, s) == FlowTable::Lookup::unknown);  // query 6 was overwritten long ago
    }
    SECTION("too many queries in flight for the flows is refused") {
        CHECK_THROWS(FlowTable(1, 131072));
    }
    SECTION("a slot reused before the timeout is an overrun") {
        FlowTable small(1000, 1024);
        for (std::uint64_t k = 0; k < 1024; ++k) small.publish(k, 0, timeout);
        CHECK(small.publish(1024, 10, timeout));
    }
}

TEST_CASE("ten million flows: 153 addresses x 65 535 ports map back, in sequence and shuffled", "[xdp_flows]") {
    std::vector<Source> sources;
    std::vector<std::string> texts;
    for (int i = 0; i < 153; ++i) texts.push_back("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256));
    for (const std::string& t : texts) sources.push_back(test_source(t.c_str(), {{1, 65535}}));
    for (FlowOrder order : {FlowOrder::sequential, FlowOrder::pseudorandom}) {
        const FlowSpace flows(sources, order, 9);
        REQUIRE(flows.size() == 153ull * 65535);
        FlowTable table(flows.size(), 1 << 17);  // 131 072 in flight, 2 MiB whatever the flow count
        CHECK(table.bytes() == (1u << 17) * 16);
        for (std::uint64_t k = 0; k < flows.size(); k += 9973) {
            const std::uint64_t flow = flows.permutation().forward(table.position(k));
            const auto e = flows.endpoint(flow);
            std::uint64_t back = 0;
            REQUIRE(flows.flow_of(e.address, e.port, back));
            REQUIRE(flows.permutation().inverse(back) == table.position(k));
        }
    }
}
