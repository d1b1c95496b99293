// libFuzzer target: the AF_XDP layer's reply path. Every input is a received
// frame: parse_reply must never crash, read out of bounds or hand on a payload
// outside the frame; a frame it accepts goes to its flow and through the reply
// classifier with the flows' matching state, whose outcome must be possible.
// Every frame it accepts also goes through the kernel filter's prefix keys
// (filter_keys.hpp, matched here as the kernel's LPM trie would): the filter
// must take a frame exactly when the flows' own lookup finds its flow.
// Seeds (tests/fuzz/frame_corpus) are the real knotd replies of fuzz_reply's
// corpus wrapped in IPv4 and IPv6 frames from the server to flow 0, and (enc-*)
// the IPv4 ones inside IPv6 from the BR to a CE's MAP address (--encap).
// Every input also goes to the encapsulated parser: it must never crash or
// point outside the frame; what it accepts must be taken by the encapsulating
// filter's keys exactly when its inner destination is one of the CEs' IPv4
// addresses, and a reply the CEs' arithmetic maps to a flow must map back
// (the flow's endpoint is the reply's destination, its CE address one value).
#include <arpa/inet.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>

#include "query.hpp"
#include "reply.hpp"
#include "xdp/encap.hpp"
#include "xdp/filter_keys.hpp"
#include "xdp/flows.hpp"
#include "xdp/frame.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;

namespace {

constexpr std::int64_t kTimeout = 250'000'000;
constexpr std::int64_t kSent = 1'000'000'000'000;
constexpr std::uint64_t kQueries = 96;

SockAddr make(int family, const char* address, std::uint16_t port) {
    SockAddr out;
    if (family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        inet_pton(AF_INET, address, &sin->sin_addr);
        out.length = sizeof(sockaddr_in);
    } else {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        inet_pton(AF_INET6, address, &sin6->sin6_addr);
        out.length = sizeof(sockaddr_in6);
    }
    return out;
}

// IPv4: one flow (port 20000), so query k is that flow's sequence k, as the
// seeds' IDs and names expect; IPv6: three flows over two ranges.
Source source(int family, const char* address, std::vector<PortRange> ranges) {
    Source s;
    s.address = make(family, address, 0);
    s.text = address;
    s.ranges = std::move(ranges);
    return s;
}

Source source(int family, const char* address) {
    if (family == AF_INET) return source(family, address, {PortRange{20000, 20000}});
    return source(family, address, {PortRange{20000, 20000}, PortRange{20002, 20003}});
}

// The filter's sources: unaligned ranges (many prefix keys each) around the seeds' port 20000.
std::vector<Source> filter_sources(int family, const char* first, const char* second) {
    return {source(family, first, {PortRange{19990, 20000}, PortRange{20003, 20037}, PortRange{65000, 65535}}),
            source(family, second, {PortRange{1, 20000}})};
}

struct FilterCheck {
    std::vector<xlb_key> keys;
    FlowSpace flows;
    explicit FilterCheck(const std::vector<Source>& sources)
        : keys(filter_keys(sources)), flows(sources, FlowOrder::sequential, 1) {}
};

bool same_bits(const std::uint8_t* a, const std::uint8_t* b, std::uint32_t bits) {
    for (std::uint32_t i = 0; i < bits; ++i) {
        const int shift = 7 - static_cast<int>(i % 8);
        if (((a[i / 8] >> shift) & 1) != ((b[i / 8] >> shift) & 1)) return false;
    }
    return true;
}

// What the kernel's LPM trie answers: some key is a prefix of the looked-up one.
bool filter_takes(const std::vector<xlb_key>& keys, const xlb_key& wanted) {
    for (const xlb_key& k : keys) {
        if (k.prefixlen <= wanted.prefixlen && same_bits(k.data, wanted.data, k.prefixlen)) return true;
    }
    return false;
}

struct Family {
    SockAddr server;
    FlowSpace flows;
    ReplyClassifier classifier;
};

struct World {
    Subnet subnet = parse_subnet("10.0.0.0/16");
    QueryTemplate query{"dns64perf.test", 28};
    Family v4{make(AF_INET, "198.51.100.2", 53), FlowSpace({source(AF_INET, "192.0.2.1")}, FlowOrder::sequential, 1),
              ReplyClassifier{query, subnet, make(AF_INET, "198.51.100.2", 53), kTimeout}};
    Family v6{make(AF_INET6, "2001:db8::53", 53),
              FlowSpace({source(AF_INET6, "2001:db8:1::1")}, FlowOrder::sequential, 1),
              ReplyClassifier{query, subnet, make(AF_INET6, "2001:db8::53", 53), kTimeout}};
    FilterCheck filter_v4{filter_sources(AF_INET, "192.0.2.1", "192.0.2.3")};
    FilterCheck filter_v6{filter_sources(AF_INET6, "2001:db8:1::1", "2001:db8:1::3")};
    // --encap: the reference document's rule, 8192 CEs (192.0.2.0 .. 192.0.2.255), every port but one of each set.
    CeSpace ces{parse_encap_rule("map-e", "2001:db8:ce::/51,192.0.2.0/24,13,0", 6000, 0, "2001:db8:6::1")};
    std::vector<xlb_key> encap_keys = ipv4_range_keys(ces.first_ipv4(), ces.last_ipv4());
    ReplyClassifier encap_classifier{query, subnet, make(AF_INET, "198.51.100.2", 53), kTimeout};
};

void check(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

namespace {

bool inside(const std::uint8_t* p, std::size_t n, const std::uint8_t* data, std::size_t size) {
    return p >= data && p + n <= data + size;
}

void check_encapsulated(const World& world, const std::uint8_t* data, std::size_t size) {
    ParsedReply reply;
    if (parse_encapsulated_reply(data, size, reply) != FrameStatus::ok) return;
    check(inside(reply.message, reply.length, data, size) && inside(reply.outer_source, 16, data, size) &&
          inside(reply.outer_destination, 16, data, size) && inside(reply.destination, 4, data, size));
    check(reply.source.family() == AF_INET);
    const std::uint32_t host = (std::uint32_t{reply.destination[0]} << 24) | (std::uint32_t{reply.destination[1]} << 16) |
                               (std::uint32_t{reply.destination[2]} << 8) | reply.destination[3];
    const bool in_range = host >= world.ces.first_ipv4() && host <= world.ces.last_ipv4();
    check(filter_takes(world.encap_keys, lookup_key(reply.destination, 4, reply.destination_port)) == in_range);
    std::uint64_t flow = 0;
    Ipv6 ce_address{};
    if (!world.ces.flow_of(reply.destination, reply.destination_port, flow, ce_address)) return;
    check(in_range && flow < world.ces.flows());
    const CeSpace::Endpoint e = world.ces.endpoint(flow);
    check(e.port == reply.destination_port && std::memcmp(e.ipv4.data(), reply.destination, 4) == 0 &&
          e.ipv6 == ce_address);
    FlowTable table(world.ces.flows(), 1024);
    for (std::uint64_t k = 0; k < kQueries; ++k) table.publish(k, kSent + static_cast<std::int64_t>(k), kTimeout);
    auto view = table.view(flow);
    const Outcome out = world.encap_classifier.classify(view, reply.message, reply.length, false, reply.source.get(),
                                                        reply.source.length, kSent + 1'000'000);
    check(out.kind != ReplyKind::late);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const World world;
    check_encapsulated(world, data, size);
    ParsedReply reply;
    const FrameStatus status = parse_reply(data, size, reply);
    if (status != FrameStatus::ok) return 0;
    check(reply.message >= data && reply.message + reply.length <= data + size);
    const bool v4 = reply.source.family() == AF_INET;
    const FilterCheck& filter = v4 ? world.filter_v4 : world.filter_v6;
    std::uint64_t filter_flow = 0;
    check(filter_takes(filter.keys, lookup_key(reply.destination, v4 ? 4 : 16, reply.destination_port)) ==
          filter.flows.flow_of(reply.destination, reply.destination_port, filter_flow));
    const Family& family = v4 ? world.v4 : world.v6;
    std::uint64_t flow = 0;
    if (!family.flows.flow_of(reply.destination, reply.destination_port, flow)) return 0;
    check(flow < family.flows.size());
    FlowTable table(family.flows.size(), 1024);
    for (std::uint64_t k = 0; k < kQueries; ++k) table.publish(k, kSent + static_cast<std::int64_t>(k), kTimeout);
    auto view = table.view(family.flows.permutation().inverse(flow));
    for (int round = 0; round < 2; ++round) {
        const Outcome out = family.classifier.classify(view, reply.message, reply.length, false, reply.source.get(),
                                                       reply.source.length, kSent + 1'000'000);
        switch (out.kind) {
        case ReplyKind::valid:
        case ReplyKind::rcode:
        case ReplyKind::nodata:
        case ReplyKind::truncated:
            check(round == 0 && out.latency_ns >= 0 && out.latency_ns <= kTimeout && out.query_index < kQueries &&
                  table.position(out.query_index) == flow);
            break;
        case ReplyKind::late:
            check(false);
            break;
        case ReplyKind::unexpected:
            check(out.cause != UnexpectedCause::none);
            break;
        case ReplyKind::duplicate:
        case ReplyKind::malformed:
            break;
        }
    }
    return 0;
}
