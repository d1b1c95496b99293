// Query frames and reply frames of the AF_XDP layer: a frame built from the
// template against one written out by hand (checksums computed independently,
// by a plain RFC 1071 sum over the assembled packet in Python), the
// incremental checksums against a full recomputation over many queries, and
// the parser on good, cut, corrupted, fragmented, tagged and foreign frames.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "reply.hpp"
#include "xdp/flows.hpp"
#include "xdp/frame.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;
using Bytes = std::vector<std::uint8_t>;

namespace {

SockAddr address(const char* text, std::uint16_t port) {
    SockAddr out;
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (inet_pton(AF_INET, text, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        out.length = sizeof(sockaddr_in);
    } else {
        REQUIRE(inet_pton(AF_INET6, text, &sin6->sin6_addr) == 1);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        out.length = sizeof(sockaddr_in6);
    }
    return out;
}

Bytes bytes_of(const char* text) {
    Bytes out(16);
    if (inet_pton(AF_INET, text, out.data()) == 1) {
        out.resize(4);
    } else {
        REQUIRE(inet_pton(AF_INET6, text, out.data()) == 1);
    }
    return out;
}

FrameSpec spec_to(const SockAddr& server) {
    FrameSpec spec;
    spec.source_mac = {0x02, 0, 0, 0, 0, 0x01};
    spec.destination_mac = {0x02, 0, 0, 0, 0, 0x02};
    spec.server = server;
    return spec;
}

// 192.0.2.1:12345 -> 198.51.100.2:53, ID 0xbeef, 010-000-000-007.dns64perf.test AAAA, RD.
const Bytes kHandBuilt = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45, 0x00, 0x00, 0x4c,
    0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x4e, 0x6a, 0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x02, 0x30, 0x39,
    0x00, 0x35, 0x00, 0x38, 0x5b, 0x83, 0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x0f, 0x30, 0x31, 0x30, 0x2d, 0x30, 0x30, 0x30, 0x2d, 0x30, 0x30, 0x30, 0x2d, 0x30, 0x30, 0x37, 0x09, 0x64,
    0x6e, 0x73, 0x36, 0x34, 0x70, 0x65, 0x72, 0x66, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x1c, 0x00, 0x01};

// The UDP checksum computed from scratch over the pseudo-header and the segment.
std::uint16_t full_udp_checksum(const Bytes& frame, std::size_t ip, bool v6) {
    const std::size_t udp = ip + (v6 ? 40 : 20);
    const std::size_t length = static_cast<std::size_t>((frame[udp + 4] << 8) | frame[udp + 5]);
    Bytes pseudo;
    if (v6) {
        pseudo.insert(pseudo.end(), frame.begin() + static_cast<long>(ip + 8), frame.begin() + static_cast<long>(ip + 40));
        pseudo.insert(pseudo.end(), {0, 0, static_cast<std::uint8_t>(length >> 8), static_cast<std::uint8_t>(length),
                                     0, 0, 0, 17});
    } else {
        pseudo.insert(pseudo.end(), frame.begin() + static_cast<long>(ip + 12), frame.begin() + static_cast<long>(ip + 20));
        pseudo.insert(pseudo.end(), {0, 17, static_cast<std::uint8_t>(length >> 8), static_cast<std::uint8_t>(length)});
    }
    Bytes segment(frame.begin() + static_cast<long>(udp), frame.begin() + static_cast<long>(udp + length));
    segment[6] = segment[7] = 0;
    pseudo.insert(pseudo.end(), segment.begin(), segment.end());
    if (pseudo.size() % 2) pseudo.push_back(0);
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < pseudo.size(); i += 2) sum += static_cast<std::uint32_t>((pseudo[i] << 8) | pseudo[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const auto c = static_cast<std::uint16_t>(~sum);
    return c == 0 ? 0xffff : c;
}

// A reply to the query in `query_frame`: addresses and ports swapped, QR set,
// one answer (a 28-byte AAAA record with a compressed owner), checksums fixed.
Bytes reply_frame(const Bytes& query_frame, bool v6) {
    Bytes f = query_frame;
    std::swap_ranges(f.begin(), f.begin() + 6, f.begin() + 6);
    const std::size_t ip = 14;
    const std::size_t a = v6 ? 16 : 4;
    const std::size_t src = ip + (v6 ? 8 : 12);
    std::swap_ranges(f.begin() + static_cast<long>(src), f.begin() + static_cast<long>(src + a),
                     f.begin() + static_cast<long>(src + a));
    const std::size_t udp = ip + (v6 ? 40 : 20);
    std::swap_ranges(f.begin() + static_cast<long>(udp), f.begin() + static_cast<long>(udp + 2),
                     f.begin() + static_cast<long>(udp + 2));
    const std::size_t dns = udp + 8;
    f[dns + 2] |= 0x80;  // QR
    f[dns + 7] = 1;      // ANCOUNT
    const Bytes answer = {0xc0, 0x0c, 0x00, 0x1c, 0x00, 0x01, 0, 0, 0x0e, 0x10, 0, 16,
                          0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    f.insert(f.end(), answer.begin(), answer.end());
    const std::size_t udp_length = f.size() - udp;
    f[udp + 4] = static_cast<std::uint8_t>(udp_length >> 8);
    f[udp + 5] = static_cast<std::uint8_t>(udp_length);
    if (v6) {
        f[ip + 4] = static_cast<std::uint8_t>(udp_length >> 8);
        f[ip + 5] = static_cast<std::uint8_t>(udp_length);
    } else {
        const std::size_t total = f.size() - ip;
        f[ip + 2] = static_cast<std::uint8_t>(total >> 8);
        f[ip + 3] = static_cast<std::uint8_t>(total);
        f[ip + 10] = f[ip + 11] = 0;
        const std::uint16_t c = fold_complement(ones_sum(f.data() + ip, 20));
        f[ip + 10] = static_cast<std::uint8_t>(c >> 8);
        f[ip + 11] = static_cast<std::uint8_t>(c);
    }
    const std::uint16_t c = full_udp_checksum(f, ip, v6);
    f[udp + 6] = static_cast<std::uint8_t>(c >> 8);
    f[udp + 7] = static_cast<std::uint8_t>(c);
    return f;
}

Bytes build(const FrameTemplate& t, const char* source, std::uint16_t port, std::uint16_t id, std::uint32_t name,
            std::uint64_t epoch) {
    Bytes f(t.size());
    t.write_template(f.data());
    const Bytes s = bytes_of(source);
    t.write(f.data(), s.data(), port, id, name, epoch);
    return f;
}

}  // namespace

TEST_CASE("a frame from the template is byte for byte the hand-built packet", "[xdp_frame]") {
    const QueryTemplate query("dns64perf.test", 28);
    const FrameTemplate t(query, spec_to(address("198.51.100.2", 53)));
    const Bytes f = build(t, "192.0.2.1", 12345, 0xbeef, (10u << 24) | 7u, 0);
    CHECK(f == kHandBuilt);
}

TEST_CASE("incremental checksums equal a full recomputation for any varying fields", "[xdp_frame]") {
    const QueryTemplate query("Dns64Perf.test", 28);
    REQUIRE(query.epoch_bits() == 8);
    std::mt19937_64 random(7);
    for (const char* server : {"198.51.100.2", "2001:db8::53"}) {
        const bool v6 = std::strchr(server, ':') != nullptr;
        const FrameTemplate t(query, spec_to(address(server, 53)));
        Bytes f(t.size());
        t.write_template(f.data());
        Bytes source = bytes_of(v6 ? "2001:db8:1::" : "192.0.2.0");
        for (int i = 0; i < 2000; ++i) {
            // Written over the previous query's frame, as a UMEM slot is reused.
            for (std::size_t b = 0; b < source.size(); ++b) source[b] = static_cast<std::uint8_t>(random());
            const auto port = static_cast<std::uint16_t>(random());
            const auto id = static_cast<std::uint16_t>(random());
            const auto name = static_cast<std::uint32_t>(random());
            const std::uint64_t epoch = random() & 0xff;
            t.write(f.data(), source.data(), port, id, name, epoch);
            INFO(server << " query " << i);
            REQUIRE(((f[t.udp_offset() + 6] << 8) | f[t.udp_offset() + 7]) == full_udp_checksum(f, 14, v6));
            if (!v6) REQUIRE(fold_complement(ones_sum(f.data() + 14, 20)) == 0);
            Bytes dns(query.size());
            query.write(dns.data(), id, name, epoch);
            REQUIRE(std::memcmp(f.data() + t.dns_offset(), dns.data(), dns.size()) == 0);
            ParsedReply parsed;
            REQUIRE(parse_reply(f.data(), f.size(), parsed) == FrameStatus::ok);
            REQUIRE(std::memcmp(parsed.destination, bytes_of(server).data(), v6 ? 16 : 4) == 0);
        }
    }
}

TEST_CASE("a reply frame yields the classifier's input", "[xdp_frame]") {
    const QueryTemplate query("dns64perf.test", 28);
    for (const char* server : {"198.51.100.2", "2001:db8::53"}) {
        const bool v6 = std::strchr(server, ':') != nullptr;
        const FrameTemplate t(query, spec_to(address(server, 53)));
        const char* tester = v6 ? "2001:db8:1::7" : "192.0.2.1";
        const Bytes reply = reply_frame(build(t, tester, 20001, 5, (10u << 24) | 9u, 0), v6);
        ParsedReply parsed;
        REQUIRE(parse_reply(reply.data(), reply.size(), parsed) == FrameStatus::ok);
        CHECK(same_endpoint(parsed.source.get(), parsed.source.length, address(server, 53)));
        CHECK(parsed.destination_port == 20001);
        CHECK(std::memcmp(parsed.destination, bytes_of(tester).data(), v6 ? 16 : 4) == 0);
        CHECK(parsed.length == query.size() + 28);
        DnsHeader header;
        REQUIRE(parse_header(parsed.message, parsed.length, header));
        CHECK((header.id == 5 && header.qr && header.ancount == 1));

        SECTION("Ethernet padding after the IP packet is ignored") {
            Bytes padded = reply;
            padded.resize(padded.size() + 20, 0);
            REQUIRE(parse_reply(padded.data(), padded.size(), parsed) == FrameStatus::ok);
            CHECK(parsed.length == query.size() + 28);
        }
        SECTION("every cut of the frame is refused, never read past") {
            for (std::size_t n = 0; n < reply.size(); ++n) {
                const Bytes cut(reply.begin(), reply.begin() + static_cast<long>(n));  // exact-size buffer (ASan)
                CHECK(parse_reply(cut.data(), cut.size(), parsed) != FrameStatus::ok);
            }
        }
        SECTION("one flipped payload bit is a bad checksum") {
            Bytes bad = reply;
            bad.back() ^= 0x01;
            CHECK(parse_reply(bad.data(), bad.size(), parsed) == FrameStatus::bad_checksum);
        }
        SECTION("a zero UDP checksum is no checksum over IPv4 and an error over IPv6") {
            Bytes zero = reply;
            const std::size_t udp = 14 + (v6 ? 40 : 20);
            zero[udp + 6] = zero[udp + 7] = 0;
            CHECK(parse_reply(zero.data(), zero.size(), parsed) ==
                  (v6 ? FrameStatus::bad_checksum : FrameStatus::ok));
        }
        SECTION("an 802.1Q tag is skipped") {
            Bytes tagged = reply;
            const Bytes tag = {0x81, 0x00, 0x00, 0x2a};
            tagged.insert(tagged.begin() + 12, tag.begin(), tag.end());
            REQUIRE(parse_reply(tagged.data(), tagged.size(), parsed) == FrameStatus::ok);
            CHECK(parsed.destination_port == 20001);
        }
    }
}

TEST_CASE("frames that are not a UDP reply are told apart", "[xdp_frame]") {
    const QueryTemplate query("dns64perf.test", 28);
    const FrameTemplate t(query, spec_to(address("198.51.100.2", 53)));
    const Bytes good = reply_frame(build(t, "192.0.2.1", 20001, 5, 1, 0), false);
    ParsedReply parsed;
    Bytes arp = good;
    arp[12] = 0x08;
    arp[13] = 0x06;
    CHECK(parse_reply(arp.data(), arp.size(), parsed) == FrameStatus::not_udp);
    Bytes fragment = good;
    fragment[14 + 6] |= 0x20;  // more fragments
    CHECK(parse_reply(fragment.data(), fragment.size(), parsed) == FrameStatus::fragment);
    Bytes bad_ip = good;
    bad_ip[14 + 8] ^= 0x01;  // TTL changed, header checksum not
    CHECK(parse_reply(bad_ip.data(), bad_ip.size(), parsed) == FrameStatus::bad_checksum);
    Bytes version = good;
    version[14] = 0x65;
    CHECK(parse_reply(version.data(), version.size(), parsed) == FrameStatus::bad_header);
}

TEST_CASE("replies to wrong ports are not ours; from a wrong source port they are unexpected", "[xdp_frame]") {
    const QueryTemplate query("dns64perf.test", 28);
    const SockAddr server = address("198.51.100.2", 53);
    const FrameTemplate t(query, spec_to(server));
    Source source;
    source.address = address("192.0.2.1", 0);
    source.text = "192.0.2.1";
    source.ranges = {PortRange{20000, 20009}};
    const FlowSpace flows({source}, FlowOrder::sequential, 1);
    FlowTable table(flows.size(), 1024);
    const Subnet subnet{10u << 24, 16};
    const ReplyClassifier classifier(query, subnet, server, 250'000'000);
    // Query 3 goes to flow 3 (port 20003) with ID 0.
    table.publish(3, 1000, 250'000'000);
    ParsedReply parsed;
    std::uint64_t flow = 0;

    const Bytes to_other_port = reply_frame(build(t, "192.0.2.1", 30003, 0, subnet.address(3), 0), false);
    REQUIRE(parse_reply(to_other_port.data(), to_other_port.size(), parsed) == FrameStatus::ok);
    CHECK_FALSE(flows.flow_of(parsed.destination, parsed.destination_port, flow));

    Bytes from_other_port = reply_frame(build(t, "192.0.2.1", 20003, 0, subnet.address(3), 0), false);
    from_other_port[34 + 1] = 54;  // source port 54, checksum fixed below
    from_other_port[34 + 6] = from_other_port[34 + 7] = 0;  // IPv4: no checksum
    REQUIRE(parse_reply(from_other_port.data(), from_other_port.size(), parsed) == FrameStatus::ok);
    REQUIRE(flows.flow_of(parsed.destination, parsed.destination_port, flow));
    CHECK(flow == 3);
    auto view = table.view(flows.permutation().inverse(flow));
    const Outcome wrong = classifier.classify(view, parsed.message, parsed.length, false, parsed.source.get(),
                                              parsed.source.length, 2000);
    CHECK((wrong.kind == ReplyKind::unexpected && wrong.cause == UnexpectedCause::wrong_source));

    const Bytes right = reply_frame(build(t, "192.0.2.1", 20003, 0, subnet.address(3), 0), false);
    REQUIRE(parse_reply(right.data(), right.size(), parsed) == FrameStatus::ok);
    const Outcome ok = classifier.classify(view, parsed.message, parsed.length, false, parsed.source.get(),
                                           parsed.source.length, 2000);
    CHECK(ok.kind == ReplyKind::valid);
    CHECK(ok.query_index == 3);
    CHECK(ok.latency_ns == 1000);
    const Outcome again = classifier.classify(view, parsed.message, parsed.length, false, parsed.source.get(),
                                              parsed.source.length, 3000);
    CHECK(again.kind == ReplyKind::duplicate);
}

TEST_CASE("a VLAN frame carries one 802.1Q tag before the IP header, and its reply parses", "[xdp_frame]") {
    const QueryTemplate query("dns64perf.test", 28);
    for (const char* server : {"198.51.100.2", "2001:db8::53"}) {
        const bool v6 = std::strchr(server, ':') != nullptr;
        FrameSpec tagged = spec_to(address(server, 53));
        tagged.vlan = 100;
        const FrameTemplate t(query, tagged);
        const FrameTemplate plain(query, spec_to(address(server, 53)));
        const char* tester = v6 ? "2001:db8:1::7" : "192.0.2.1";
        const Bytes f = build(t, tester, 20001, 5, (10u << 24) | 9u, 3);
        const Bytes g = build(plain, tester, 20001, 5, (10u << 24) | 9u, 3);
        INFO(server);
        REQUIRE(f.size() == g.size() + 4);
        CHECK(t.ip_offset() == 18);
        // TPID 0x8100, TCI = VLAN 100 (priority 0), then the untagged frame's EtherType and the rest.
        CHECK((f[12] == 0x81 && f[13] == 0x00 && f[14] == 0 && f[15] == 100));
        CHECK(std::equal(f.begin(), f.begin() + 12, g.begin()));
        CHECK(std::equal(f.begin() + 16, f.end(), g.begin() + 12));
        // The reply as the server's side tags it: the same tag in front of the untagged reply.
        Bytes reply = reply_frame(g, v6);
        reply.insert(reply.begin() + 12, {0x81, 0x00, 0x00, 100});
        ParsedReply parsed;
        REQUIRE(parse_reply(reply.data(), reply.size(), parsed) == FrameStatus::ok);
        CHECK(parsed.destination_port == 20001);
        CHECK(std::memcmp(parsed.destination, bytes_of(tester).data(), v6 ? 16 : 4) == 0);
    }
}
