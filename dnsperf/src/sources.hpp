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
