// Reply classification on replies built with ldns (an independent DNS encoder)
// and on hand-broken ones.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <ldns/ldns.h>
#include <memory>
#include <string>
#include <netinet/in.h>
#include <vector>

#include "reply.hpp"

using namespace xlatperf;

namespace {

struct PktDeleter {
    void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using Pkt = std::unique_ptr<ldns_pkt, PktDeleter>;
using Bytes = std::vector<std::uint8_t>;

constexpr std::int64_t kTimeout = 250'000'000;
constexpr std::int64_t kSent = 1'000'000'000'000;

SockAddr ipv4(const char* address, std::uint16_t port) {
    SockAddr out;
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    REQUIRE(inet_pton(AF_INET, address, &sin->sin_addr) == 1);
    out.length = sizeof(sockaddr_in);
    return out;
}

SockAddr ipv6(const char* address, std::uint16_t port) {
    SockAddr out;
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    REQUIRE(inet_pton(AF_INET6, address, &sin6->sin6_addr) == 1);
    out.length = sizeof(sockaddr_in6);
    return out;
}

struct ReplySpec {
    ldns_pkt_rcode rcode = LDNS_RCODE_NOERROR;
    int answers = 1;
    bool tc = false;
    bool drop_question = false;
};

// The server's reply to `query` as ldns writes it.
Bytes reply_to(const Bytes& query, const ReplySpec& spec = {}) {
    ldns_pkt* raw = nullptr;
    REQUIRE(ldns_wire2pkt(&raw, query.data(), query.size()) == LDNS_STATUS_OK);
    Pkt pkt(raw);
    ldns_pkt_set_qr(pkt.get(), true);
    ldns_pkt_set_aa(pkt.get(), true);
    ldns_pkt_set_rcode(pkt.get(), static_cast<std::uint8_t>(spec.rcode));
    ldns_pkt_set_tc(pkt.get(), spec.tc);
    const ldns_rr* question = ldns_rr_list_rr(ldns_pkt_question(pkt.get()), 0);
    char* owner = ldns_rdf2str(ldns_rr_owner(question));
    for (int i = 0; i < spec.answers; ++i) {
        ldns_rr* rr = nullptr;
        const std::string text = std::string(owner) + " 3600 IN AAAA 2001:db8::" + std::to_string(i + 1);
        REQUIRE(ldns_rr_new_frm_str(&rr, text.c_str(), 0, nullptr, nullptr) == LDNS_STATUS_OK);
        REQUIRE(ldns_pkt_push_rr(pkt.get(), LDNS_SECTION_ANSWER, rr));
    }
    LDNS_FREE(owner);
    if (spec.drop_question) {
        ldns_rr_list_deep_free(ldns_pkt_question(pkt.get()));
        ldns_pkt_set_question(pkt.get(), ldns_rr_list_new());
        ldns_pkt_set_qdcount(pkt.get(), 0);
    }
    std::uint8_t* wire = nullptr;
    std::size_t size = 0;
    REQUIRE(ldns_pkt2wire(&wire, pkt.get(), &size) == LDNS_STATUS_OK);
    Bytes out(wire, wire + size);
    LDNS_FREE(wire);
    return out;
}

struct Fixture {
    Subnet subnet = parse_subnet("10.0.0.0/16");
    QueryTemplate query{"dns64perf.test", 28};
    SockAddr server = ipv4("127.0.0.1", 53);
    ReplyClassifier classifier{query, subnet, server, kTimeout};
    OutstandingRing ring{64};

    // Query `sequence` of the socket asks for name k; returns its bytes.
    Bytes send(std::uint64_t sequence, std::uint64_t k) {
        Bytes wire(query.size());
        query.write(wire.data(), static_cast<std::uint16_t>(sequence), subnet.address(k), sequence >> 16);
        REQUIRE_FALSE(ring.publish(sequence, k, kSent, kTimeout));
        return wire;
    }
    Outcome receive(const Bytes& reply, std::int64_t after_ns = 50'000, const SockAddr* from = nullptr,
                    bool cut = false) {
        const SockAddr& source = from ? *from : server;
        return classifier.classify(ring, reply.data(), reply.size(), cut, source.get(), source.length,
                                   kSent + after_ns);
    }
};

}  // namespace

TEST_CASE("a timely NOERROR reply with an answer to an outstanding query is valid, once") {
    Fixture f;
    const Bytes query = f.send(5, 1234);
    const Bytes reply = reply_to(query);
    const Outcome first = f.receive(reply, 42'000);
    CHECK(first.kind == ReplyKind::valid);
    CHECK(first.latency_ns == 42'000);
    CHECK(first.query_index == 1234);
    const Outcome second = f.receive(reply, 43'000);
    CHECK(second.kind == ReplyKind::duplicate);
}

TEST_CASE("a reply after the timeout is late, whatever its RCODE") {
    Fixture f;
    CHECK(f.receive(reply_to(f.send(1, 10)), kTimeout + 1).kind == ReplyKind::late);
    CHECK(f.receive(reply_to(f.send(2, 11), {LDNS_RCODE_SERVFAIL, 0}), kTimeout + 1).kind == ReplyKind::late);
    CHECK(f.receive(reply_to(f.send(3, 12)), kTimeout).kind == ReplyKind::valid);  // exactly the timeout is in time
}

TEST_CASE("error RCODEs are counted by code") {
    Fixture f;
    const Outcome nx = f.receive(reply_to(f.send(1, 10), {LDNS_RCODE_NXDOMAIN, 0}));
    CHECK(nx.kind == ReplyKind::rcode);
    CHECK(nx.rcode == 3);
    const Outcome servfail = f.receive(reply_to(f.send(2, 11), {LDNS_RCODE_SERVFAIL, 0}));
    CHECK(servfail.kind == ReplyKind::rcode);
    CHECK(servfail.rcode == 2);
    const Outcome refused = f.receive(reply_to(f.send(3, 12), {LDNS_RCODE_REFUSED, 1}));
    CHECK(refused.kind == ReplyKind::rcode);
    CHECK(refused.rcode == 5);
}

TEST_CASE("an error reply without a question matches by ID alone") {
    Fixture f;
    const Outcome formerr = f.receive(reply_to(f.send(9, 10), {LDNS_RCODE_FORMERR, 0, false, true}));
    CHECK(formerr.kind == ReplyKind::rcode);
    CHECK(formerr.rcode == 1);
    // ... but a NOERROR reply must carry the question.
    CHECK(f.receive(reply_to(f.send(10, 11), {LDNS_RCODE_NOERROR, 0, false, true})).kind == ReplyKind::malformed);
}

TEST_CASE("NOERROR without answers is nodata; TC=1 is truncated") {
    Fixture f;
    CHECK(f.receive(reply_to(f.send(1, 10), {LDNS_RCODE_NOERROR, 0})).kind == ReplyKind::nodata);
    CHECK(f.receive(reply_to(f.send(2, 11), {LDNS_RCODE_NOERROR, 0, true})).kind == ReplyKind::truncated);
}

TEST_CASE("a reply with an ID no query of this socket has is unexpected") {
    Fixture f;
    const Bytes query = f.send(5, 1234);
    Bytes reply = reply_to(query);
    reply[1] = 6;  // ID 6: never sent
    const Outcome out = f.receive(reply);
    CHECK(out.kind == ReplyKind::unexpected);
    CHECK(out.cause == UnexpectedCause::unknown_id);
    CHECK(f.receive(reply_to(query)).kind == ReplyKind::valid);  // the real reply still counts
}

TEST_CASE("a reply with the right ID but another question is unexpected and leaves the query outstanding") {
    Fixture f;
    const Bytes query = f.send(5, 1234);
    Bytes other(f.query.size());
    f.query.write(other.data(), 5, f.subnet.address(1235));
    const Outcome out = f.receive(reply_to(other));
    CHECK(out.kind == ReplyKind::unexpected);
    CHECK(out.cause == UnexpectedCause::wrong_question);
    CHECK(f.receive(reply_to(query)).kind == ReplyKind::valid);
}

TEST_CASE("a reply from another address or port is unexpected") {
    Fixture f;
    const Bytes query = f.send(5, 1234);
    const SockAddr other_port = ipv4("127.0.0.1", 54);
    const SockAddr other_host = ipv4("127.0.0.2", 53);
    const SockAddr v6 = ipv6("::1", 53);
    for (const SockAddr* from : {&other_port, &other_host, &v6}) {
        const Outcome out = f.receive(reply_to(query), 1000, from);
        CHECK(out.kind == ReplyKind::unexpected);
        CHECK(out.cause == UnexpectedCause::wrong_source);
    }
    CHECK(f.receive(reply_to(query)).kind == ReplyKind::valid);
}

TEST_CASE("IPv6 servers are matched by address and port") {
    Fixture f;
    const SockAddr server = ipv6("2001:db8::53", 5353);
    const ReplyClassifier classifier(f.query, f.subnet, server, kTimeout);
    const Bytes reply = reply_to(f.send(3, 3));
    const SockAddr wrong = ipv6("2001:db8::54", 5353);
    CHECK(classifier.classify(f.ring, reply.data(), reply.size(), false, wrong.get(), wrong.length, kSent).cause ==
          UnexpectedCause::wrong_source);
    CHECK(classifier.classify(f.ring, reply.data(), reply.size(), false, server.get(), server.length, kSent).kind ==
          ReplyKind::valid);
}

TEST_CASE("truncated, cut, garbage and non-response datagrams are malformed and harm nothing") {
    Fixture f;
    const Bytes query = f.send(5, 1234);
    const Bytes reply = reply_to(query);

    const Bytes header_only(reply.begin(), reply.begin() + 12);
    CHECK(f.receive(header_only).kind == ReplyKind::malformed);
    const Bytes half_question(reply.begin(), reply.begin() + 20);
    CHECK(f.receive(half_question).kind == ReplyKind::malformed);
    const Bytes no_answer_data(reply.begin(), reply.begin() + static_cast<long>(f.query.question_end()) + 5);
    CHECK(f.receive(no_answer_data).kind == ReplyKind::malformed);
    CHECK(f.receive(reply, 1000, nullptr, true).kind == ReplyKind::malformed);  // cut by the receive buffer
    CHECK(f.receive(Bytes{}).kind == ReplyKind::malformed);
    CHECK(f.receive(Bytes{0x00, 0x05, 0x81}).kind == ReplyKind::malformed);
    CHECK(f.receive(Bytes(100, 0xff)).kind == ReplyKind::malformed);  // QR=1 but opcode 15, QDCOUNT 65535
    CHECK(f.receive(query).kind == ReplyKind::malformed);             // QR=0: our own query echoed back
    Bytes two_questions = reply;
    two_questions[5] = 2;
    CHECK(f.receive(two_questions).kind == ReplyKind::malformed);

    CHECK(f.receive(reply).kind == ReplyKind::valid);  // none of that consumed the query
}

TEST_CASE("a reply to a query whose slot was reused is unexpected") {
    Fixture f;
    const Bytes old_query = f.send(5, 1234);
    // Same slot, new ID, sent after the old query timed out.
    CHECK_FALSE(f.ring.publish(5 + 64, 9999, kSent + kTimeout + 1, kTimeout));
    const Outcome out = f.receive(reply_to(old_query));
    CHECK(out.kind == ReplyKind::unexpected);
    CHECK(out.cause == UnexpectedCause::unknown_id);
}

TEST_CASE("letters past the epoch letters may come back in any case; the epoch letters may not") {
    Fixture f;
    Bytes reply = reply_to(f.send(8, 77));
    Bytes upper = reply;
    std::size_t letters = 0;
    for (std::size_t i = kLabelOffset + kLabelLength; i < f.query.question_end() - 4; ++i) {
        if (reply[i] < 'a' || reply[i] > 'z') continue;
        upper[i] = static_cast<std::uint8_t>(upper[i] - 32);
        if (++letters > QueryTemplate::kMaxEpochBits) reply[i] = upper[i];
    }
    CHECK(f.receive(reply).kind == ReplyKind::valid);
    Fixture g;
    g.send(8, 77);
    const Outcome wrong_case = g.receive(upper);
    CHECK(wrong_case.kind == ReplyKind::unexpected);
    CHECK(wrong_case.cause == UnexpectedCause::unknown_id);
}

TEST_CASE("a held reply is never the answer of the newer query that reuses its ID and name") {
    // One socket, /16: query j and j + 65536 share ID, ring slot and QNAME.
    Fixture f;
    const std::uint64_t j = 100;
    const Bytes old_query = f.send(j, j);
    const Bytes held = reply_to(old_query);
    // The sender comes round again; the newer query is sent 3 s later (and dropped by the peer).
    Bytes newer(f.query.size());
    f.query.write(newer.data(), static_cast<std::uint16_t>(j + 65536), f.subnet.address(j + 65536), 1);
    REQUIRE_FALSE(f.ring.publish(j + 65536, j + 65536, kSent + 3'000'000'000, kTimeout));
    const Outcome outcome = f.receive(held, 3'000'100'000);  // 100 us after the newer query
    CHECK(outcome.kind == ReplyKind::unexpected);
    CHECK(outcome.cause == UnexpectedCause::unknown_id);
    // The newer query is still outstanding: its own reply is valid.
    const Outcome own = f.receive(reply_to(newer), 3'000'200'000);
    CHECK(own.kind == ReplyKind::valid);
    CHECK(own.latency_ns == 200'000);
}

TEST_CASE("a reply received before its query was sent is never latency 0") {
    Fixture f;
    const Bytes query = f.send(9, 9);
    const Outcome outcome = f.receive(reply_to(query), -1'000);
    CHECK(outcome.kind == ReplyKind::unexpected);
    CHECK(outcome.cause == UnexpectedCause::unknown_id);
}

TEST_CASE("a reply spelling an epoch its ID never carried proves a case rewrite") {
    // An upper-casing server: query 8 (epoch 0) comes back with all eight epoch letters flipped.
    Fixture f;
    const Bytes query = f.send(8, 8);
    Bytes upper = reply_to(query);
    for (std::size_t at : f.query.epoch_letter_offsets()) upper[at] = static_cast<std::uint8_t>(upper[at] - 32);
    const Outcome out = f.receive(upper);
    CHECK(out.kind == ReplyKind::unexpected);
    REQUIRE(out.other_epoch);
    CHECK(out.sequence == 8);
    CHECK(out.spelled_epoch == 0xff);
    CHECK(case_rewrite_evidence(out.sequence, out.spelled_epoch, f.query.epoch_bits(), false) ==
          CaseRewrite::never_sent);
}

TEST_CASE("epoch 0 spelled back to an epoch-1 query is a case rewrite only when epoch 0 had its reply") {
    // A lower-casing server and a lower-case domain: epoch 1's replies spell epoch 0.
    Fixture f;
    const std::uint64_t j = 100;
    f.send(j, j);
    Bytes newer(f.query.size());
    f.query.write(newer.data(), static_cast<std::uint16_t>(j + 65536), f.subnet.address(j + 65536), 1);
    REQUIRE_FALSE(f.ring.publish(j + 65536, j + 65536, kSent + 3'000'000'000, kTimeout));
    Bytes lowered = reply_to(newer);
    for (std::size_t at : f.query.epoch_letter_offsets()) lowered[at] = static_cast<std::uint8_t>(lowered[at] | 0x20u);
    const Outcome out = f.receive(lowered, 3'000'100'000);
    CHECK(out.kind == ReplyKind::unexpected);
    REQUIRE(out.other_epoch);
    CHECK(out.sequence == j + 65536);
    CHECK(out.spelled_epoch == 0);
    // Epoch 0's query had its reply: a second one 65 536 queries later is no held reply.
    CHECK(case_rewrite_evidence(out.sequence, 0, 8, true) == CaseRewrite::answered_before);
    // It had none: this may be its reply, held past the ID's reuse (test_xlatperf_wrap.py).
    CHECK(case_rewrite_evidence(out.sequence, 0, 8, false) == CaseRewrite::none);
}

TEST_CASE("case-rewrite evidence: what each spelling proves") {
    // Epoch 2 holding the ID, epoch 1 spelled: a held reply is possible, nothing is proved.
    CHECK(case_rewrite_evidence(2 * 65536 + 5, 1, 8, true) == CaseRewrite::none);
    CHECK(case_rewrite_evidence(2 * 65536 + 5, 3, 8, false) == CaseRewrite::never_sent);
    // Once the epochs have gone round (2^bits of them), every spelling was sent before.
    CHECK(case_rewrite_evidence(std::uint64_t{4} << 16, 7, 2, false) == CaseRewrite::none);
    CHECK(case_rewrite_evidence(std::uint64_t{3} << 16, 0, 2, true) == CaseRewrite::none);
    CHECK(case_rewrite_evidence(5, 1, 0, false) == CaseRewrite::none);  // no letters, no epochs
    CHECK(std::string(case_rewrite_name(CaseRewrite::never_sent)) == "never-sent");
}

TEST_CASE("latency counts from when the query left within its send call, once the sender knows it") {
    Fixture f;
    const Bytes first = f.send(1, 1);
    const Bytes second = f.send(2, 2);
    // Query 2 was the second message of its call and left 3 us after the clock read before it.
    f.ring.set_left(2, kSent + 3'000);
    const Outcome known = f.receive(reply_to(second), 50'000);
    CHECK(known.kind == ReplyKind::valid);
    CHECK(known.latency_ns == 47'000);
    // Not known yet (the reply beat the end of the call): from the clock read before the call.
    CHECK(f.receive(reply_to(first), 50'000).latency_ns == 50'000);
    // A time after the reply proves the interpolation wrong for it: the read before the call stands.
    const Bytes third = f.send(3, 3);
    f.ring.set_left(3, kSent + 60'000);
    CHECK(f.receive(reply_to(third), 50'000).latency_ns == 50'000);
    // A slot reused by a later query forgets the old time.
    const Bytes reused = f.send(3 + 64, 3 + 64);
    CHECK(f.receive(reply_to(reused), 50'000).latency_ns == 50'000);
}
