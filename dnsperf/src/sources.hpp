#pragma once
// Source addresses and ports: `--source ADDR[,PORTS...]` (repeatable) parsed,
// checked against the sockets a run opens, and the socket -> source assignment
// (thread i, socket j: source (i*K + j) mod S, that source's ports in order).

#include <string>
#include <vector>

#include "config.hpp"

namespace xlatperf {

// Parses one --source value: an IPv4/IPv6 literal, then optional ",PORT" or
// ",FIRST-LAST" port ranges in increasing order. Throws OptionError.
Source parse_source(const std::string& text);

// Most addresses one --source FIRST-LAST address range may name.
constexpr std::uint64_t kMaxSourceAddresses = 4096;

// Parses one --source value that may name an address range, "198.18.0.1-198.18.0.16,1024-63523":
// one Source per address, in increasing order, each with the same port ranges. Throws OptionError.
std::vector<Source> parse_sources(const std::string& text);

// The ports a source's sockets (or flows) take: the first `source.sockets` ports of its
// ranges, in order (the ranges cut after them; empty for ephemeral ports).
std::vector<PortRange> used_ports(const Source& source);

// Fills plan.sources from --source (or from --bind / --first-port) and checks
// them against the server's family and the run's sockets. Needs plan.server and
// plan.bind set; throws OptionError.
void plan_sources(const Config& config, Plan& plan);

// Sockets that send from source `index` of `count` when `sockets` are spread round-robin.
std::uint64_t sockets_of_source(std::uint64_t sockets, std::size_t count, std::size_t index);

// Where socket `socket` of thread `thread` sends from.
SocketSource socket_source(const Plan& plan, unsigned thread, unsigned socket);

// "192.0.2.8,55296-57343" (ranges joined with ','; the address alone when ephemeral).
std::string source_text(const Source& source);

}  // namespace xlatperf
