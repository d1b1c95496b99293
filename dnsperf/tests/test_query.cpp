#include <catch2/catch.hpp>
#include <cstring>
#include <ldns/ldns.h>
#include <memory>
#include <stdexcept>
#include <vector>

#include "query.hpp"

using namespace xlatperf;

namespace {

struct PktDeleter {
    void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using Pkt = std::unique_ptr<ldns_pkt, PktDeleter>;

// The query as ldns builds it from scratch: the reference our patched template must equal.
std::vector<std::uint8_t> ldns_query(const std::string& name, ldns_rr_type type, std::uint16_t id) {
    ldns_pkt* raw = nullptr;
    REQUIRE(ldns_pkt_query_new_frm_str(&raw, name.c_str(), type, LDNS_RR_CLASS_IN, LDNS_RD) == LDNS_STATUS_OK);
    Pkt pkt(raw);
    ldns_pkt_set_id(pkt.get(), id);
    std::uint8_t* wire = nullptr;
    std::size_t size = 0;
    REQUIRE(ldns_pkt2wire(&wire, pkt.get(), &size) == LDNS_STATUS_OK);
    std::vector<std::uint8_t> out(wire, wire + size);
    LDNS_FREE(wire);
    return out;
}

std::string owner_of_question(const ldns_pkt* pkt) {
    const ldns_rr* q = ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
    char* text = ldns_rdf2str(ldns_rr_owner(q));
    std::string out(text);
    LDNS_FREE(text);
    return out;
}

}  // namespace

TEST_CASE("query names follow dns64perf++: zero-padded octets of subnet base + k") {
    const Subnet slash8 = parse_subnet("10.0.0.0/8");
    CHECK(query_name(slash8, "dns64perf.test", 0) == "010-000-000-000.dns64perf.test.");
    CHECK(query_name(slash8, "dns64perf.test", 1) == "010-000-000-001.dns64perf.test.");
    CHECK(query_name(slash8, "dns64perf.test", 256) == "010-000-001-000.dns64perf.test.");
    CHECK(query_name(slash8, "dns64perf.test.", 0x00ABCDEF) == "010-171-205-239.dns64perf.test.");
    CHECK(query_name(parse_subnet("192.0.2.0/24"), "example.org", 7) == "192-000-002-007.example.org.");
}

TEST_CASE("query names wrap around at the subnet size") {
    const Subnet s16 = parse_subnet("10.0.0.0/16");
    CHECK(query_name(s16, "d", 65535) == "010-000-255-255.d.");
    CHECK(query_name(s16, "d", 65536) == "010-000-000-000.d.");
    CHECK(query_name(s16, "d", 65537) == "010-000-000-001.d.");
    CHECK(query_name(s16, "d", 3 * 65536 + 258) == "010-000-001-002.d.");
    const Subnet s32 = parse_subnet("10.1.2.3/32");
    CHECK(query_name(s32, "d", 0) == "010-001-002-003.d.");
    CHECK(query_name(s32, "d", 12345) == "010-001-002-003.d.");
    const Subnet all = parse_subnet("0.0.0.0/0");
    CHECK(all.size() == (std::uint64_t{1} << 32));
    CHECK(query_name(all, "d", 0xFFFFFFFFull) == "255-255-255-255.d.");
    CHECK(query_name(all, "d", 0x100000000ull) == "000-000-000-000.d.");
}

TEST_CASE("bad subnets are refused with the reason") {
    CHECK_THROWS_WITH(parse_subnet("10.0.0.1/16"), Catch::Contains("host bits") && Catch::Contains("10.0.0.0/16"));
    CHECK_THROWS_WITH(parse_subnet("10.0.0.0"), Catch::Contains("prefix"));
    CHECK_THROWS_WITH(parse_subnet("10.0.0.0/33"), Catch::Contains("0..32"));
    CHECK_THROWS_WITH(parse_subnet("10.0.0.0/"), Catch::Contains("0..32"));
    CHECK_THROWS_WITH(parse_subnet("2001:db8::/64"), Catch::Contains("IPv4"));
    CHECK_THROWS_AS(parse_subnet("ten/8"), std::invalid_argument);
}

TEST_CASE("query types resolve by name") {
    CHECK(parse_qtype("AAAA") == 28);
    CHECK(parse_qtype("A") == 1);
    CHECK(parse_qtype("TXT") == 16);
    CHECK_THROWS_WITH(parse_qtype("BOGUS"), Catch::Contains("BOGUS"));
}

TEST_CASE("query bytes equal the packet ldns builds for the same name, type and ID") {
    const Subnet subnet = parse_subnet("10.0.0.0/16");
    for (const char* type_name : {"AAAA", "A"}) {
        const std::uint16_t type = parse_qtype(type_name);
        const QueryTemplate query("dns64perf.test", type);
        for (const std::uint64_t k : {0ull, 1ull, 255ull, 65535ull, 65536ull, 123456789ull}) {
            for (const std::uint16_t id : {std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{0xBEEF}, std::uint16_t{0xFFFF}}) {
                std::vector<std::uint8_t> ours(query.size());
                query.write(ours.data(), id, subnet.address(k));
                INFO("type " << type_name << " k " << k << " id " << id);
                CHECK(ours == ldns_query(query_name(subnet, "dns64perf.test", k), static_cast<ldns_rr_type>(type), id));
            }
        }
    }
}

TEST_CASE("ldns parses our query back to the intended question and flags") {
    const Subnet subnet = parse_subnet("10.0.0.0/8");
    const QueryTemplate query("Example.ORG", 28);
    std::vector<std::uint8_t> wire(query.size());
    query.write(wire.data(), 0x1234, subnet.address(1));
    ldns_pkt* raw = nullptr;
    REQUIRE(ldns_wire2pkt(&raw, wire.data(), wire.size()) == LDNS_STATUS_OK);
    Pkt pkt(raw);
    CHECK(ldns_pkt_id(pkt.get()) == 0x1234);
    CHECK(ldns_pkt_rd(pkt.get()));
    CHECK_FALSE(ldns_pkt_qr(pkt.get()));
    CHECK(ldns_pkt_get_opcode(pkt.get()) == LDNS_PACKET_QUERY);
    CHECK(ldns_pkt_qdcount(pkt.get()) == 1);
    CHECK(ldns_pkt_ancount(pkt.get()) == 0);
    CHECK(ldns_pkt_arcount(pkt.get()) == 0);
    const ldns_rr* q = ldns_rr_list_rr(ldns_pkt_question(pkt.get()), 0);
    CHECK(ldns_rr_get_type(q) == LDNS_RR_TYPE_AAAA);
    CHECK(ldns_rr_get_class(q) == LDNS_RR_CLASS_IN);
    CHECK(owner_of_question(pkt.get()) == "010-000-000-001.Example.ORG.");
}

TEST_CASE("the question of a reply matches case-insensitively, type and class exactly") {
    const Subnet subnet = parse_subnet("10.0.0.0/16");
    const QueryTemplate query("dns64perf.test", 28);
    std::vector<std::uint8_t> wire(query.size());
    query.write(wire.data(), 7, subnet.address(42));
    CHECK(query.question_matches(wire.data(), wire.size(), subnet.address(42)));
    CHECK_FALSE(query.question_matches(wire.data(), wire.size(), subnet.address(43)));
    CHECK_FALSE(query.question_matches(wire.data(), wire.size() - 1, subnet.address(42)));

    // Letters past the ones carrying the epoch (8 of "dns64perfte|st") compare case-insensitively.
    auto upper = wire;
    upper[upper.size() - 6] = 'T';
    upper[upper.size() - 7] = 'S';
    CHECK(query.question_matches(upper.data(), upper.size(), subnet.address(42)));

    auto other_type = wire;
    other_type[other_type.size() - 3] = 1;  // QTYPE A
    CHECK_FALSE(query.question_matches(other_type.data(), other_type.size(), subnet.address(42)));
    auto other_class = wire;
    other_class[other_class.size() - 1] = 3;  // QCLASS CH
    CHECK_FALSE(query.question_matches(other_class.data(), other_class.size(), subnet.address(42)));
    auto other_domain = wire;
    other_domain[kLabelOffset + kLabelLength + 1] = 'x';
    CHECK_FALSE(query.question_matches(other_domain.data(), other_domain.size(), subnet.address(42)));
}

TEST_CASE("bad domains are refused") {
    CHECK_THROWS_AS(QueryTemplate("", 28), std::invalid_argument);
    CHECK_THROWS_AS(QueryTemplate("a..b", 28), std::invalid_argument);
    CHECK_THROWS_AS(QueryTemplate(std::string(64, 'x') + ".test", 28), std::invalid_argument);
    CHECK_THROWS_AS(QueryTemplate(std::string(250, 'x'), 28), std::invalid_argument);
    CHECK_NOTHROW(QueryTemplate("dns64perf.test.", 28));
}

TEST_CASE("the ID epoch rides in the case of the domain's first letters") {
    const Subnet subnet = parse_subnet("10.0.0.0/16");
    const QueryTemplate query("dns64perf.test", 28);
    REQUIRE(query.epoch_bits() == QueryTemplate::kMaxEpochBits);
    std::vector<std::uint8_t> wire(query.size());
    query.write(wire.data(), 7, subnet.address(42), 0b101);
    const std::string name(wire.begin() + kLabelOffset + kLabelLength, wire.end() - 4);
    CHECK(name == std::string("\x09" "DnS64perf" "\x04" "test" "\x00", 16));
    using Match = QueryTemplate::Match;
    CHECK(query.match_question(wire.data(), wire.size(), subnet.address(42), 0b101) == Match::same);
    CHECK(query.match_question(wire.data(), wire.size(), subnet.address(42), 0b101 + 256) == Match::same);
    CHECK(query.match_question(wire.data(), wire.size(), subnet.address(42), 0b100) == Match::other_epoch);
    CHECK(query.match_question(wire.data(), wire.size(), subnet.address(43), 0b101) == Match::different);
}

TEST_CASE("a domain without letters carries no epoch and still matches") {
    const Subnet subnet = parse_subnet("10.0.0.0/16");
    const QueryTemplate query("64.0", 28);
    CHECK(query.epoch_bits() == 0);
    std::vector<std::uint8_t> wire(query.size());
    query.write(wire.data(), 7, subnet.address(1), 3);
    CHECK(query.question_matches(wire.data(), wire.size(), subnet.address(1), 3));
}
