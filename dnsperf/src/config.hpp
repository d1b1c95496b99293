#pragma once
// What the user asks for (Config, with every default in one place: the parser
// binds to it and --help prints from it) and what a trial runs (Plan, the
// validated and derived form of a Config). The address value types it is
// made of (address.hpp) are the I/O layers' too, which never see a Config.

#include <cstdint>
#include <string>
#include <vector>

#include "address.hpp"
#include "xdp/encap.hpp"

namespace xlatperf {

struct Config {
    std::string server;                   // IPv4 or IPv6 literal; required
    std::uint16_t port = 53;
    double rate_qps = 1000;               // total over all sender threads, queries/s
    double duration_s = 10;               // trial length; ignored when queries > 0
    std::uint64_t queries = 0;            // 0: rate × duration
    unsigned threads = 1;                 // sender + receiver thread pairs
    unsigned ports_per_thread = 4;        // source ports (sockets) per sender
    std::uint16_t first_port = 0;         // 0: ephemeral ports chosen by the kernel
    std::string bind;                     // local address; empty: any of the server's family
    std::vector<std::string> sources;     // --source ADDR[,PORTS...] (repeatable); empty: --bind / --first-port
    double timeout_s = 0.25;              // a reply later than this is "late" (RFC 8219)
    std::string domain = "dns64perf.test";
    std::string qtype = "AAAA";
    std::string subnet = "10.0.0.0/16";   // query k asks for base + (k mod size)
    std::string sender_cpus;              // e.g. "0" or "0,2-3"; empty: no pinning
    std::string receiver_cpus;
    std::uint64_t rcvbuf = 4u << 20;      // bytes asked per socket; 0: kernel default
    std::uint64_t sndbuf = 0;             // bytes asked per socket; 0: kernel default
    unsigned batch = 64;                  // most queries per sendmmsg / replies per recvmmsg
    std::string gso = "auto";             // UDP_SEGMENT sends: auto (where the kernel cuts the batch), on, off
    double send_tick_s = 1e-3;            // a sender wakes at most this often (s)
    double recv_tick_s = 1e-3;            // a receiver that read replies sleeps this long before reading again (s)
    double send_tolerance = 1e-5;         // allowed relative excess of the send window
    double send_tolerance_s = 2e-3;       // allowed absolute excess of the send window (s)
    double max_lag_s = 0.02;              // largest allowed delay of one query behind schedule (s)
    double latency_from_s = 0;            // latency covers queries sent this long after query 0 or later (s)
    std::string json_path;                // empty: no JSON file
    std::string run_id;                   // empty: a random one
    bool quiet = false;
    // I/O backend: socket (UDP sockets, the default) or xdp (AF_XDP: flows without sockets, frames built
    // by the tester, replies taken by its XDP program).
    std::string io = "socket";
    std::string xdp_mode = "auto";        // XDP attach mode: auto (native, else generic), native, generic
    std::string xdp_interface;            // empty: the interface the route to the server leaves by
    std::uint32_t xdp_queue = 0;          // the first interface queue: thread i binds xdp_queue + i
    std::string xdp_queues;               // or the queues as a list ("0,2-3"), one per thread; empty: from xdp_queue
    std::uint32_t xdp_frames = 4096;      // UMEM frames for receiving and as many for sending (power of two)
    std::string flow_order = "sequential"; // --io xdp: the order of the flows in each round: sequential, pseudorandom
    std::uint64_t flow_seed = 0;          // key of the pseudorandom order; 0: a random one (recorded)
    unsigned vlan = 0;                    // --io xdp: 802.1Q VLAN ID of the frames (1..4094); 0: untagged
    std::string encap;                    // --io xdp: map-e or lw4o6 (simulated CEs); empty: no encapsulation
    std::string encap_rule;               // IPV6PREFIX,IPV4PREFIX,BITS,PSIDOFFSET (xdp/encap.hpp)
    std::uint64_t encap_ces = 0;          // CEs simulated
    std::uint64_t encap_ports = 0;        // ports per CE (0: the whole set, less port 0's place)
    std::string encap_br;                 // the BR's (lwAFTR's) IPv6 address
};

// --io xdp: most flows (--ports-per-thread) one thread may have (sockets: 65535).
constexpr std::uint64_t kMaxFlowsPerThread = std::uint64_t{1} << 24;

// Where one socket sends from: an index into Plan::sources and a port (0: ephemeral).
struct SocketSource {
    std::size_t source = 0;
    std::uint16_t port = 0;
};

struct Plan {
    Config config;
    std::vector<std::string> argv;
    SockAddr server;
    SockAddr bind;                         // port 0; the socket layer sets each port
    std::string server_text;               // canonical text of the server address
    std::string bind_text;                 // empty with --source
    std::vector<Source> sources;           // always at least one: --source list, else --bind / --first-port
    bool sources_given = false;            // --source was used
    Subnet subnet;
    std::uint16_t qtype = 28;
    std::uint64_t total_queries = 0;
    double scheduled_window_s = 0;         // total_queries / rate
    std::vector<int> sender_cpus;          // empty: not pinned
    std::vector<int> receiver_cpus;
    double per_socket_rate_qps = 0;
    std::uint32_t ring_slots = 0;          // outstanding-query slots per socket (power of two)
    std::int64_t timeout_ns = 0;
    double effective_send_tolerance_s = 0; // max(send_tolerance × window, send_tolerance_s)
    // Senders stop here, from the schedule's start, whatever is left: window + tolerance + --max-lag. A
    // query not sent by then is later than both limits, so the verdict is tester-limited already and
    // anything sent after it would only load the server.
    double send_bound_s = 0;
    std::size_t series_rows = 0;           // per-second rows each pair preallocates (send bound + timeout + 3)
    std::uint64_t prealloc_bytes = 0;      // what the trial allocates before the first query (estimate, bytes)
    bool xdp = false;                      // --io xdp
    std::uint64_t xdp_slots = 0;           // --io xdp: in-flight query slots of the flow table (power of two)
    std::uint64_t xdp_in_flight = 0;       // --io xdp: queries in flight, ceil(rate x timeout)
    std::vector<std::uint32_t> xdp_queues; // --io xdp: the interface queue of thread i (one AF_XDP socket each)
    bool flow_pseudorandom = false;        // --flow-order pseudorandom
    std::uint64_t flow_seed = 0;           // its key (never 0: --flow-seed, else drawn at random)
    bool encap = false;                    // --encap: the flows are the simulated CEs' (xdp/encap.hpp)
    xdp::EncapRule encap_rule;
    SockAddr encap_br;                     // the BR's address (port 0): where the frames are routed
};

// Queries one socket may have waiting for a reply: half the 16-bit ID space, so
// an ID comes back on a socket no sooner than two timeouts after its last use.
constexpr double kMaxOutstandingPerSocket = 32768;

// The send-lag histogram's range (lags beyond it count in its last bucket): 100 s.
constexpr std::uint64_t kMaxLagRecordedNs = 100'000'000'000;

// A trial refuses to preallocate more than this (rings, series, histograms, buffers).
constexpr std::uint64_t kMaxPreallocBytes = std::uint64_t{1} << 30;

}  // namespace xlatperf
