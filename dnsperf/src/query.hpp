#pragma once
// The queries: dns64perf++-compatible names and a wire template built by ldns
// that the hot path only patches (ID and the 15 digits of the first label).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "address.hpp"

namespace xlatperf {

// Length of the first label "AAA-BBB-CCC-DDD".
constexpr std::size_t kLabelLength = 15;
// Offset of that label in the query: after the 12-byte header and its length byte.
constexpr std::size_t kLabelOffset = 13;

// "10.0.0.0/16" -> Subnet; throws std::invalid_argument with a one-line reason.
Subnet parse_subnet(const std::string& text);

// Writes the 15 characters "AAA-BBB-CCC-DDD" of an IPv4 address (host order).
void write_label(std::uint32_t address, char* out);

// "010-000-000-001.dns64perf.test." for query 1 of 10.0.0.0/8.
std::string query_name(const Subnet& subnet, std::string_view domain, std::uint64_t query_index);

// Resolves "AAAA", "A", "TYPE65", ... to its number; throws std::invalid_argument.
std::uint16_t parse_qtype(const std::string& text);

class QueryTemplate {
public:
    // Builds the query (RD set, class IN, no EDNS) with ldns; throws
    // std::invalid_argument when the domain is not a valid name.
    QueryTemplate(std::string_view domain, std::uint16_t qtype);

    std::size_t size() const { return wire_.size(); }
    const std::vector<std::uint8_t>& wire() const { return wire_; }

    // Writes the query for `address` with transaction `id` into out[0, size()).
    // `epoch` (the socket's query number / 65536: how often the ID has wrapped)
    // flips the case of the domain's first kMaxEpochBits letters (bit b, letter b;
    // epoch 0 writes the domain as given; the DNS 0x20 trick),
    // so that a reply to query j never matches query j + 65536, which has the same
    // ID and, with a /16 subnet, the same name.
    void write(std::uint8_t* out, std::uint16_t id, std::uint32_t address, std::uint64_t epoch = 0) const;

    enum class Match { same, other_epoch, different };

    // Whether message[12, 12 + question size) is the question we asked for
    // `address` in `epoch`: QNAME compared case-insensitively, then the case of
    // the letters carrying the epoch (other_epoch when only they differ); QTYPE
    // and QCLASS exactly.
    Match match_question(const std::uint8_t* message, std::size_t length, std::uint32_t address,
                         std::uint64_t epoch) const;
    bool question_matches(const std::uint8_t* message, std::size_t length, std::uint32_t address,
                          std::uint64_t epoch = 0) const {
        return match_question(message, length, address, epoch) == Match::same;
    }

    // The epoch a reply's question spells in the case of the epoch letters (bit b set
    // when letter b differs from the domain as given); meaningful only when
    // match_question said other_epoch (or same) for this message.
    std::uint64_t spelled_epoch(const std::uint8_t* message) const;

    // Epochs told apart: 2^epoch_bits() (0 bits, no protection, for a domain without letters).
    unsigned epoch_bits() const { return static_cast<unsigned>(epoch_letters_.size()); }

    static constexpr unsigned kMaxEpochBits = 8;

    // Offsets of the letters carrying the epoch bits (frame builders write only these).
    const std::vector<std::size_t>& epoch_letter_offsets() const { return epoch_letters_; }

    // Offset just past the question section (the template has nothing after it).
    std::size_t question_end() const { return wire_.size(); }

private:
    std::vector<std::uint8_t> wire_;          // epoch 0, ID 0, the first address
    std::vector<std::size_t> epoch_letters_;  // offsets of the letters carrying the epoch bits
};

}  // namespace xlatperf
