#pragma once
// The reply filter's table as the kernel program looks it up: every (tester
// address, port range) pair written as the fewest (address, port prefix) keys
// of a longest-prefix-match trie over address bits followed by port bits. A
// reply's (destination address, destination port) is then one trie lookup,
// whatever the number of sources and ranges (at most 30 keys per range).
// No kernel here: the loader (program.cpp) writes the keys into the map.

#include <cstdint>
#include <vector>

#include "address.hpp"
#include "xdp/filter_abi.h"

namespace xlatperf::xdp {

// A block of ports: `first` aligned to 2^(16 - bits), covering 2^(16 - bits) ports.
struct PortPrefix {
    std::uint16_t first = 0;
    unsigned bits = 16;  // 0..16 leading port bits fixed
};

// The fewest aligned blocks that cover exactly [first, last], in increasing order.
std::vector<PortPrefix> port_prefixes(std::uint16_t first, std::uint16_t last);

// The trie keys of every source's ranges (a source without ranges: ports 1-65535).
std::vector<xlb_key> filter_keys(const std::vector<Source>& sources);

// --encap: the keys of the IPv4 addresses first .. last (host order), every port of each: the fewest
// aligned address blocks (at most 62 keys), prefixlen the block's address bits.
std::vector<xlb_key> ipv4_range_keys(std::uint32_t first, std::uint32_t last);

// The key the program looks up for a reply to (address, port); `address` is 4 or 16 bytes, network order.
xlb_key lookup_key(const std::uint8_t* address, std::size_t length, std::uint16_t port);

}  // namespace xlatperf::xdp
