// libFuzzer target: reply classification with a ring of outstanding queries.
// Every input is classified as a datagram from the server (and, by the first
// byte's low bit, as cut or from another source); the classifier must never
// crash, read out of bounds or report an impossible outcome. Seeds are real
// knotd replies (tests/fuzz/corpus) to the queries published below.
#include <arpa/inet.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <netinet/in.h>

#include "query.hpp"
#include "reply.hpp"
#include "ring.hpp"

using namespace xlatperf;

namespace {

constexpr std::int64_t kTimeout = 250'000'000;
constexpr std::int64_t kSent = 1'000'000'000'000;
constexpr std::uint64_t kQueries = 96;  // sequences 0..95 on a 64-slot ring: some slots reused

SockAddr ipv4(const char* address, std::uint16_t port) {
    SockAddr out;
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    inet_pton(AF_INET, address, &sin->sin_addr);
    out.length = sizeof(sockaddr_in);
    return out;
}

struct World {
    Subnet subnet = parse_subnet("10.0.0.0/16");
    QueryTemplate query{"dns64perf.test", 28};
    SockAddr server = ipv4("127.0.0.1", 53);
    SockAddr other = ipv4("127.0.0.1", 5353);
    ReplyClassifier classifier{query, subnet, server, kTimeout};
};

void check(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const World world;
    OutstandingRing ring(64);
    for (std::uint64_t s = 0; s < kQueries; ++s) ring.publish(s, s, kSent + static_cast<std::int64_t>(s), kTimeout);
    const bool cut = size > 0 && (data[0] & 1u) != 0 && size > 12;
    const SockAddr& source = size > 1 && (data[1] & 0x40u) != 0 && size > 40 ? world.other : world.server;
    for (int round = 0; round < 2; ++round) {  // the second time, a matched reply is a duplicate
        const Outcome out = world.classifier.classify(ring, data, size, cut, source.get(), source.length,
                                                      kSent + 1'000'000);
        switch (out.kind) {
        case ReplyKind::valid:
        case ReplyKind::rcode:
        case ReplyKind::nodata:
        case ReplyKind::truncated:
            check(round == 0 && out.latency_ns >= 0 && out.latency_ns <= kTimeout && out.query_index < kQueries);
            break;
        case ReplyKind::late:
            check(false);  // every query was sent 1 ms before, well inside the timeout
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
