#pragma once
// The tester's I/O backend for one trial, opened by one factory (open_backend)
// from the trial plan. The generator (trial.cpp) never names an I/O mode: it
// asks the backend for each pair's two halves (io.hpp) and its channels (the
// sockets, or the flows, a pair's queries leave on), and, once every thread has
// ended, for what the backend counted of its own, in one shape for every
// backend (IoCounters), beside the backend's own block of the JSON (IoReport).
//
// Backends: io/socket_io (UDP sockets, the default) and io/xdp_io (AF_XDP).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "io/io.hpp"
#include "io/io_report.hpp"
#include "net.hpp"
#include "query.hpp"

namespace xlatperf::io {

// One channel (a socket, or a flow) as the report names it: its source address and port.
struct Flow {
    std::string address;
    std::uint16_t port = 0;
};

class Backend {
public:
    virtual ~Backend() = default;

    // The channels pair `pair`'s queries leave on, and one of them by the number its ReceiveIo gives.
    virtual std::uint64_t channels(unsigned pair) const = 0;
    virtual Flow channel(unsigned pair, std::uint64_t number) const = 0;
    // True when the channels are every pair's (each takes every pair's queries in turn) and a reply may
    // reach any pair's receiver; false when each pair owns its channels and gets its own replies.
    virtual bool channels_shared() const = 0;
    // The two halves of pair `pair`; they count into the pair's statistics.
    virtual std::unique_ptr<SendIo> sender(unsigned pair, SenderStats& stats) = 0;
    virtual std::unique_ptr<ReceiveIo> receiver(unsigned pair, ReceiverStats& stats) = 0;
    // What the threads JSON lists of pair `pair`: its ports and their addresses (empty for flows).
    virtual void describe(unsigned pair, PairResult& result) const = 0;
    // The devices the queries leave by: their drops during the trial are the tester's egress drops.
    virtual std::vector<int> egress_devices() const = 0;
    // After every thread ended: the backend's setup and counters. `namespace_udp` is the increase of the
    // network namespace's UDP error counters over the trial (what the kernel counted at any socket).
    virtual IoReport finish(const UdpErrorCounters& namespace_udp) = 0;
};

// Opens the plan's backend (--io): sockets bound, or the AF_XDP program attached and its sockets bound, before
// the first query; everything is taken down when it goes. Throws StartError.
std::unique_ptr<Backend> open_backend(const Plan& plan, const QueryTemplate& query);

}  // namespace xlatperf::io
