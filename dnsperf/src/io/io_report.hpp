#pragma once
// What the I/O backend of a trial was and what it counted: the JSON's `io`
// block. Every backend reports its own counters in one shape (IoCounters);
// each adds its own setup block. Plain numbers only, so the report needs no
// AF_XDP headers.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gso.hpp"

namespace xlatperf::io {

// What one AF_XDP socket counted over the trial: its threads' counts and its XDP_STATISTICS. The
// report gives them per queue and, summed over the queues, for the whole trial.
struct XdpSocketCounters {
    std::uint64_t frames_sent = 0;       // query frames put on the TX ring
    std::uint64_t kicks = 0;             // sendto() wake-ups of the TX ring
    std::uint64_t tx_ring_waits = 0;     // times the TX ring had no free frame
    std::uint64_t frames_received = 0;   // frames read from the RX ring (replies that arrived on it)
    std::uint64_t other_queue_replies = 0;  // of them, replies to flows whose queries another queue sent
    // XDP_STATISTICS of the socket.
    std::uint64_t rx_dropped = 0;
    std::uint64_t rx_invalid_descs = 0;
    std::uint64_t tx_invalid_descs = 0;
    std::uint64_t rx_ring_full = 0;
    std::uint64_t rx_fill_ring_empty = 0;
    std::uint64_t tx_ring_empty = 0;
    // The tester's own drops: rx_dropped + rx_ring_full + rx_invalid_descs.
    std::uint64_t own_drops() const { return rx_dropped + rx_ring_full + rx_invalid_descs; }
    XdpSocketCounters& operator+=(const XdpSocketCounters& other);
};

// One interface queue's socket (one thread pair's).
struct XdpQueueReport {
    std::uint32_t queue = 0;
    XdpSocketCounters counters;
};

// --encap: the simulated CEs (xdp/encap.hpp) and the replies the BR encapsulated to another CE.
struct EncapReport {
    std::string mode;                    // "map-e" or "lw4o6"; empty: no encapsulation
    std::string rule;                    // IPV6PREFIX,IPV4PREFIX,BITS,PSIDOFFSET
    std::string br;
    std::uint64_t ces = 0;
    std::uint64_t ports_per_ce = 0;
    unsigned psid_length = 0;
    unsigned psid_offset = 0;
    std::uint64_t table_bytes = 0;       // what the CEs take: the rule only, whatever their number
    std::uint64_t wrong_ce = 0;          // replies whose outer destination is not their inner destination's CE
};

// The AF_XDP backend's setup and counters over the trial; the counters are the sums over the queues.
struct XdpReport {
    std::string interface;
    std::string attach_mode;             // "native" or "generic"
    bool zero_copy = false;              // the driver's zero-copy mode (else copy mode)
    std::uint32_t queue = 0;             // the first queue bound
    std::uint32_t queues = 1;            // queues bound (one socket each, one per thread pair)
    std::uint32_t interface_queues = 0;  // the interface's receive queues (0: unknown)
    std::vector<XdpQueueReport> per_queue;
    std::uint32_t prog_id = 0;
    bool stale_program_removed = false;  // a program a killed run had left was replaced
    std::string next_hop_mac;
    unsigned vlan = 0;                   // 802.1Q VLAN ID of the frames; 0: untagged
    bool next_hop_probed = false;        // the neighbour entry was absent and a probe resolved it
    std::uint32_t frame_size = 0;        // bytes per UMEM frame
    std::uint32_t rx_frames = 0;
    std::uint32_t tx_frames = 0;
    std::uint32_t ring_size = 0;         // entries of each of the four rings
    std::uint64_t query_frame_bytes = 0;
    std::uint64_t flows = 0;             // (source address, port) pairs
    std::string flow_order;              // "sequential" or "pseudorandom"
    std::uint64_t flow_seed = 0;         // key of the pseudorandom order
    std::uint64_t in_flight = 0;         // queries in flight: ceil(rate x timeout)
    std::uint64_t slots = 0;             // in-flight query slots of the flow table
    std::uint64_t slot_bytes = 0;        // bytes of matching state per slot
    std::uint64_t flow_space_bytes = 0;  // the sources' table (addresses, port ranges): per source, not per flow
    std::uint64_t case_bitmap_bytes = 0; // a bit per ID of each flow whose IDs wrap (only those flows)
    XdpSocketCounters totals;            // the sums over the queues
    // The kernel program's counters.
    std::uint64_t redirected = 0;        // frames it handed to the socket
    std::uint64_t passed = 0;            // frames it passed to the kernel (not replies to the tester's bound queues)
    std::uint64_t unbound = 0;           // of them, replies to the tester's flows on a queue without a socket
    std::uint64_t filter_keys = 0;       // (address, port prefix) keys of its prefix trie
    // Frames the parser refused (the kernel would have dropped them before a socket saw them).
    std::uint64_t frame_truncated = 0;
    std::uint64_t frame_not_udp = 0;
    std::uint64_t frame_fragment = 0;
    std::uint64_t frame_bad_header = 0;
    std::uint64_t frame_bad_checksum = 0;
    std::uint64_t frame_not_our_flow = 0;
    EncapReport encap;                   // --encap only (mode empty otherwise)
};

// What every backend counts of its own over the trial, in one shape.
struct IoCounters {
    // Replies the tester's own receive path dropped: full socket receive buffers (the sockets' SO_MEMINFO
    // drops not explained by the namespace's checksum errors), or the AF_XDP sockets' rx_dropped +
    // rx_ring_full + rx_invalid_descs. The tester's loss, never the DUT's.
    std::uint64_t tester_drops = 0;
    // Replies with a bad UDP checksum (the namespace's InCsumErrors; with AF_XDP also the frames the
    // parser refused for it): the DUT's fault, their queries unanswered.
    std::uint64_t checksum_errors = 0;
    // Replies to the tester's flows that arrived where it had no reader (AF_XDP: an interface queue
    // without a socket, so the kernel got them): the tester's loss.
    std::uint64_t unbound_queue_replies = 0;
};

// The socket backend's setup: its sockets and the buffers the kernel granted each.
struct SocketReport {
    std::uint64_t count = 0;
    int rcvbuf_granted = 0;              // as getsockopt reports, per socket
    int sndbuf_granted = 0;
    bool buffers_forced = false;
};

struct IoReport {
    std::string mode = "socket";         // "socket" or "xdp"
    IoCounters counters;                 // every mode
    SocketReport sockets;                // mode "socket" (count 0 otherwise)
    GsoChoice gso;                       // whether the senders start with UDP_SEGMENT, and why
    XdpReport xdp;                       // mode "xdp" only
};

// The JSON `io` block: the mode and its counters (`tester_drops`, `checksum_errors`,
// `unbound_queue_replies`), and with mode "xdp" the setup, the ring sizes, XDP_STATISTICS, the program's
// counters, the frame parser's refusals and the frames per kick.
nlohmann::json to_json(const IoReport& report);

}  // namespace xlatperf::io
