#include "xdp/filter_keys.hpp"

#include <cstring>
#include <netinet/in.h>

namespace xlatperf::xdp {
namespace {

// The key's data: the address (4 or 16 bytes) and the port in network order right after it.
xlb_key make_key(const std::uint8_t* address, std::size_t length, std::uint16_t port, std::uint32_t prefix_bits) {
    xlb_key key{};
    key.prefixlen = prefix_bits;
    std::memcpy(key.data, address, length);
    key.data[length] = static_cast<std::uint8_t>(port >> 8);
    key.data[length + 1] = static_cast<std::uint8_t>(port & 0xff);
    return key;
}

const std::uint8_t* address_bytes(const SockAddr& address, std::size_t& length) {
    if (address.family() == AF_INET) {
        length = 4;
        return reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_addr);
    }
    length = 16;
    return reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_addr);
}

}  // namespace

std::vector<PortPrefix> port_prefixes(std::uint16_t first, std::uint16_t last) {
    std::vector<PortPrefix> out;
    std::uint32_t at = first;
    const std::uint32_t end = std::uint32_t{last} + 1;
    while (at < end) {
        // The largest block aligned at `at` that ends inside the range.
        unsigned free_bits = 0;
        while (free_bits < 16 && (at & ((2u << free_bits) - 1)) == 0 && at + (2u << free_bits) <= end) ++free_bits;
        out.push_back(PortPrefix{static_cast<std::uint16_t>(at), 16 - free_bits});
        at += 1u << free_bits;
    }
    return out;
}

std::vector<xlb_key> filter_keys(const std::vector<Source>& sources) {
    std::vector<xlb_key> keys;
    for (const Source& source : sources) {
        std::size_t length = 0;
        const std::uint8_t* address = address_bytes(source.address, length);
        std::vector<PortRange> ranges = source.ranges;
        if (ranges.empty()) ranges.push_back(PortRange{1, 65535});
        for (const PortRange& range : ranges) {
            for (const PortPrefix& p : port_prefixes(range.first, range.last)) {
                keys.push_back(make_key(address, length, p.first, static_cast<std::uint32_t>(length * 8 + p.bits)));
            }
        }
    }
    return keys;
}

std::vector<xlb_key> ipv4_range_keys(std::uint32_t first, std::uint32_t last) {
    std::vector<xlb_key> keys;
    std::uint64_t at = first;
    const std::uint64_t end = std::uint64_t{last} + 1;
    while (at < end) {
        unsigned free_bits = 0;
        while (free_bits < 32 && (at & ((std::uint64_t{2} << free_bits) - 1)) == 0 &&
               at + (std::uint64_t{2} << free_bits) <= end) {
            ++free_bits;
        }
        const std::uint8_t address[4] = {static_cast<std::uint8_t>(at >> 24), static_cast<std::uint8_t>(at >> 16),
                                         static_cast<std::uint8_t>(at >> 8), static_cast<std::uint8_t>(at)};
        keys.push_back(make_key(address, 4, 0, 32 - free_bits));
        at += std::uint64_t{1} << free_bits;
    }
    return keys;
}

xlb_key lookup_key(const std::uint8_t* address, std::size_t length, std::uint16_t port) {
    return make_key(address, length, port, static_cast<std::uint32_t>(length * 8 + 16));
}

}  // namespace xlatperf::xdp
