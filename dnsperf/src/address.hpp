#pragma once
// The tester's address value types: a socket address the hot path hands to the
// kernel as is, a port range, a source (an address with its ports), a subnet of
// query names. The CLI's Plan (config.hpp) is made of them, and the I/O layers
// (net, query, reply, xdp/) use them without knowing the CLI.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>

namespace xlatperf {

// A socket address the hot path can hand to the kernel as is.
struct SockAddr {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family() const { return storage.ss_family; }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Source ports FIRST..LAST, inclusive.
struct PortRange {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    std::uint64_t size() const { return std::uint64_t{last} - first + 1; }
};

// One local address the tester sends from, with the ports its sockets take in
// order (empty: ephemeral ports chosen by the kernel).
struct Source {
    SockAddr address;                      // port 0
    std::string text;                      // canonical address text
    std::vector<PortRange> ranges;
    std::uint64_t sockets = 0;             // sockets that send from it
    std::uint64_t port_count() const {
        std::uint64_t n = 0;
        for (const PortRange& r : ranges) n += r.size();
        return n;
    }
};

struct Subnet {
    std::uint32_t base = 0;               // host byte order
    unsigned prefix_length = 0;
    std::uint64_t size() const { return std::uint64_t{1} << (32 - prefix_length); }
    std::uint32_t address(std::uint64_t query_index) const {
        return base + static_cast<std::uint32_t>(query_index % size());
    }
};

}  // namespace xlatperf
