#pragma once
// The AF_XDP backend of the I/O seam (io.hpp): one interface queue per thread
// pair, one AF_XDP socket (with its own UMEM and rings) on each, one XDP
// program of the tester's taking only its replies (its XSK map indexed by the
// receive queue), flows without sockets. XdpLink sets everything up before the
// first query and takes it down (the program detached, the sockets closed)
// when it goes, so a trial that throws leaves nothing on the interface.
//
// Pair i's sender uses only queue i's TX and completion rings, its receiver
// only queue i's RX and fill rings. A reply arrives on whatever queue the
// other side's hash puts its 5-tuple on, so a receiver also reads replies to
// queries another pair's sender sent: the matching state is one flow table for
// all pairs, indexed by the query number k, whose slots each have one writer
// at a time (the sender of k) and are answered by an atomic compare-and-swap,
// so any receiver may match any reply; every counter is per queue (one writer).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "io/backend.hpp"
#include "io/io.hpp"
#include "io/io_report.hpp"
#include "query.hpp"

namespace xlatperf::io {

// The flows of a plan: each source keeps the first `sockets` ports of its ranges
// (used_ports), the (address, port) pairs the socket backend would bind. Throws StartError when a
// source has no ports.
std::vector<Source> flow_sources(const Plan& plan);

// The flow table's slot count: the plan's, but at most 65536 per flow (a power of two).
std::uint64_t flow_slots(std::uint64_t planned, std::uint64_t flows);

class XdpLink final : public Backend {
public:
    // Resolves the interface and the next hop, loads and attaches the program, binds
    // the socket and writes the frame template into every TX frame. Throws StartError.
    XdpLink(const Plan& plan, const QueryTemplate& query);
    ~XdpLink() override;
    XdpLink(const XdpLink&) = delete;
    XdpLink& operator=(const XdpLink&) = delete;

    // Every pair's channels are all the flows (a flow takes every pair's queries in turn), and a
    // reply arrives on whatever queue the other side's hash picks: channels_shared().
    // channel(): the flow at a position of a round of the flow table (where replies are counted):
    // no list of them is kept, whatever their number.
    std::uint64_t channels(unsigned pair) const override;
    Flow channel(unsigned pair, std::uint64_t position) const override;
    bool channels_shared() const override { return true; }
    // The two halves of pair `pair` (its queue: the pair-th of the plan's).
    std::unique_ptr<SendIo> sender(unsigned pair, SenderStats& stats) override;
    std::unique_ptr<ReceiveIo> receiver(unsigned pair, ReceiverStats& stats) override;
    void describe(unsigned pair, PairResult& result) const override;
    // The interface (its egress drops are the tester's).
    std::vector<int> egress_devices() const override;
    // The setup and the counters (reads the kernel's counters: call after the threads ended).
    IoReport finish(const UdpErrorCounters& namespace_udp) override;

    struct State;
    struct Queue;

private:
    std::unique_ptr<State> state_;
};

}  // namespace xlatperf::io
