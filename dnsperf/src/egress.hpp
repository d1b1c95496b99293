#pragma once
// The tester's own egress: which devices its queries leave by (the kernel's
// route from each source address to the server) and what those devices and
// their root qdiscs dropped. Read through rtnetlink before and after a trial,
// never in the send loop.
//
// Why per device: a qdisc may drop without telling the socket (a shaper that
// segments a GSO batch accepts it when any segment fits; fq_codel drops from
// the fattest flow and returns success or NET_XMIT_CN; CoDel drops at dequeue;
// a driver that drops counts tx_dropped and returns OK), and the namespace's UDP
// SndbufErrors count every socket of the namespace, another process's too.

#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"

namespace xlatperf {

// The interface index of the kernel's route from `source` (the wildcard: any) to
// `server`, as `ip route get SERVER from SOURCE` shows it (RTM_GETROUTE, policy
// rules included); 0 when it cannot be found. A local destination gives the
// loopback device, as the kernel then sends through it.
int route_device(const SockAddr& server, const SockAddr& source);

// One device's drop counters at one moment.
struct DeviceDrops {
    int index = 0;
    std::string name;                // "" when the device could not be read
    std::string qdisc;               // kind of its root qdisc ("noqueue", "tbf", "mq", ...); "" when none was read
    std::uint64_t qdisc_drops = 0;   // the root qdisc's drops (a root counts its children's, and mq sums its queues)
    std::uint64_t tx_dropped = 0;    // the device's tx_dropped (IFLA_STATS64)
    bool read = false;               // both the link and its qdiscs were read
};

// The distinct devices the sockets' sources route to the server by (in the order found).
std::vector<int> egress_devices(const SockAddr& server, const std::vector<SockAddr>& sources);

DeviceDrops read_device_drops(int index);

// What one egress device dropped during the trial: after - before of each counter.
struct EgressDevice {
    std::string name;
    std::string qdisc;
    std::uint64_t qdisc_drops = 0;
    std::uint64_t tx_dropped = 0;
    bool read = false;               // read before and after (counters are 0 otherwise)
};

EgressDevice egress_delta(const DeviceDrops& before, const DeviceDrops& after);

}  // namespace xlatperf
