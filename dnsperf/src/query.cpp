#include "query.hpp"

#include <arpa/inet.h>
#include <array>
#include <cstring>
#include <ldns/ldns.h>
#include <memory>
#include <stdexcept>

namespace xlatperf {
namespace {

// Three zero-padded decimal digits per octet value, computed once.
const std::array<std::array<char, 3>, 256>& octet_digits() {
    static const auto table = [] {
        std::array<std::array<char, 3>, 256> t{};
        for (unsigned v = 0; v < 256; ++v) {
            t[v] = {static_cast<char>('0' + v / 100), static_cast<char>('0' + v / 10 % 10),
                    static_cast<char>('0' + v % 10)};
        }
        return t;
    }();
    return table;
}

struct LdnsPktDeleter {
    void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};

std::uint8_t lower(std::uint8_t c) { return c >= 'A' && c <= 'Z' ? static_cast<std::uint8_t>(c + 32) : c; }

}  // namespace

Subnet parse_subnet(const std::string& text) {
    const auto slash = text.find('/');
    const std::string example = " (example: 10.0.0.0/16)";
    if (slash == std::string::npos) {
        throw std::invalid_argument("bad subnet '" + text + "': missing /prefix-length" + example);
    }
    in_addr address{};
    if (inet_pton(AF_INET, text.substr(0, slash).c_str(), &address) != 1) {
        throw std::invalid_argument("bad subnet '" + text + "': not an IPv4 address" + example);
    }
    const std::string length_text = text.substr(slash + 1);
    if (length_text.empty() || length_text.size() > 2 ||
        length_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(length_text) > 32) {
        throw std::invalid_argument("bad subnet '" + text + "': prefix length must be 0..32" + example);
    }
    Subnet subnet;
    subnet.prefix_length = static_cast<unsigned>(std::stoi(length_text));
    subnet.base = ntohl(address.s_addr);
    const std::uint64_t host_mask = subnet.size() - 1;
    if ((subnet.base & host_mask) != 0) {
        throw std::invalid_argument("bad subnet '" + text + "': host bits set; the network is " +
                                    [&] {
                                        in_addr net{htonl(subnet.base & ~static_cast<std::uint32_t>(host_mask))};
                                        char buf[INET_ADDRSTRLEN];
                                        inet_ntop(AF_INET, &net, buf, sizeof buf);
                                        return std::string(buf);
                                    }() +
                                    "/" + length_text);
    }
    return subnet;
}

void write_label(std::uint32_t address, char* out) {
    const auto& digits = octet_digits();
    for (int i = 0; i < 4; ++i) {
        const auto& d = digits[(address >> (24 - 8 * i)) & 0xffu];
        std::memcpy(out + 4 * i, d.data(), 3);
        if (i < 3) out[4 * i + 3] = '-';
    }
}

std::string query_name(const Subnet& subnet, std::string_view domain, std::uint64_t query_index) {
    std::string name(kLabelLength, '\0');
    write_label(subnet.address(query_index), name.data());
    name += '.';
    name += domain;
    if (name.back() != '.') name += '.';
    return name;
}

std::uint16_t parse_qtype(const std::string& text) {
    const ldns_rr_type type = ldns_get_rr_type_by_name(text.c_str());
    if (type == 0) {
        throw std::invalid_argument("bad query type '" + text + "': expected a type name such as AAAA or A");
    }
    return static_cast<std::uint16_t>(type);
}

QueryTemplate::QueryTemplate(std::string_view domain, std::uint16_t qtype) {
    const std::string name = query_name(Subnet{}, domain, 0);
    ldns_pkt* raw = nullptr;
    if (domain.empty() || domain.front() == '.' ||
        ldns_pkt_query_new_frm_str(&raw, name.c_str(), static_cast<ldns_rr_type>(qtype), LDNS_RR_CLASS_IN,
                                   LDNS_RD) != LDNS_STATUS_OK) {
        throw std::invalid_argument("bad domain '" + std::string(domain) +
                                    "': not a valid DNS name for queries like " + name);
    }
    const std::unique_ptr<ldns_pkt, LdnsPktDeleter> packet(raw);
    ldns_pkt_set_id(packet.get(), 0);
    std::uint8_t* wire = nullptr;
    std::size_t size = 0;
    if (ldns_pkt2wire(&wire, packet.get(), &size) != LDNS_STATUS_OK) {
        throw std::invalid_argument("bad domain '" + std::string(domain) + "': ldns cannot encode " + name);
    }
    wire_.assign(wire, wire + size);
    LDNS_FREE(wire);
    if (wire_.size() < kLabelOffset + kLabelLength || wire_[12] != kLabelLength) {
        throw std::logic_error("query template: first label is not where it must be");
    }
    // Label length bytes are < 64, so never letters: any letter byte is in a label.
    for (std::size_t i = kLabelOffset + kLabelLength; i + 4 < wire_.size(); ++i) {
        if (lower(wire_[i]) < 'a' || lower(wire_[i]) > 'z' || epoch_letters_.size() == kMaxEpochBits) continue;
        epoch_letters_.push_back(i);
    }
}

void QueryTemplate::write(std::uint8_t* out, std::uint16_t id, std::uint32_t address, std::uint64_t epoch) const {
    std::memcpy(out, wire_.data(), wire_.size());
    out[0] = static_cast<std::uint8_t>(id >> 8);
    out[1] = static_cast<std::uint8_t>(id & 0xffu);
    write_label(address, reinterpret_cast<char*>(out + kLabelOffset));
    for (std::size_t b = 0; b < epoch_letters_.size(); ++b) {
        if ((epoch >> b) & 1u) out[epoch_letters_[b]] ^= 0x20u;  // flips the letter's case
    }
}

QueryTemplate::Match QueryTemplate::match_question(const std::uint8_t* message, std::size_t length,
                                                   std::uint32_t address, std::uint64_t epoch) const {
    if (length < wire_.size()) return Match::different;
    char label[kLabelLength];
    write_label(address, label);
    if (message[12] != kLabelLength || std::memcmp(message + kLabelOffset, label, kLabelLength) != 0) {
        return Match::different;
    }
    // The rest of the name (length bytes are < 64, so lowering them is harmless),
    // then QTYPE and QCLASS, which must match exactly.
    const std::size_t name_end = wire_.size() - 4;
    for (std::size_t i = kLabelOffset + kLabelLength; i < name_end; ++i) {
        if (lower(message[i]) != lower(wire_[i])) return Match::different;
    }
    if (std::memcmp(message + name_end, wire_.data() + name_end, 4) != 0) return Match::different;
    for (std::size_t b = 0; b < epoch_letters_.size(); ++b) {
        const std::size_t at = epoch_letters_[b];
        const auto expected = static_cast<std::uint8_t>(wire_[at] ^ (((epoch >> b) & 1u) ? 0x20u : 0u));
        if (message[at] != expected) return Match::other_epoch;
    }
    return Match::same;
}

std::uint64_t QueryTemplate::spelled_epoch(const std::uint8_t* message) const {
    std::uint64_t epoch = 0;
    for (std::size_t b = 0; b < epoch_letters_.size(); ++b) {
        if (message[epoch_letters_[b]] != wire_[epoch_letters_[b]]) epoch |= std::uint64_t{1} << b;
    }
    return epoch;
}

}  // namespace xlatperf
