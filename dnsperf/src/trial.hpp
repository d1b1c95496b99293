#pragma once
// One trial: N sender/receiver thread pairs. The schedule, pacing, lag, the
// per-second series and the accounting are trial.cpp's, written once; the I/O
// backend (io/backend.hpp, opened for the plan: K UDP sockets per pair with their
// rings, or one AF_XDP socket per pair over flows without sockets) only moves
// batches and reports its own counters; the trial never names its mode. Everything a trial allocates is
// sized before the first query (by rate x timeout, or per second of schedule);
// the send and receive loops allocate nothing.

#include <array>
#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "config.hpp"
#include "egress.hpp"
#include "histogram.hpp"
#include "io/io_report.hpp"
#include "reply.hpp"

namespace xlatperf {

// Why a sender stopped: it sent its whole schedule; it reached the send bound
// (window + tolerance + --max-lag) with queries left; a signal; another thread failed.
enum class SendStop { schedule_sent, bound, signal, failure };
const char* send_stop_name(SendStop stop);

struct SenderStats {
    std::uint64_t sent = 0;              // queries the kernel accepted
    std::uint64_t send_errors = 0;       // queries dropped because sendmmsg failed (not EAGAIN)
    std::uint64_t unsent = 0;            // scheduled queries never sent (errors, give-up, interrupt)
    std::uint64_t would_block = 0;       // sendmmsg calls that hit a full socket (retried)
    std::uint64_t ring_overruns = 0;     // queries that replaced one still inside its timeout
    std::array<std::uint64_t, 256> errno_counts{};
    std::int64_t first_send_ns = -1;     // CLOCK_MONOTONIC relative to the schedule start
    std::int64_t last_send_ns = -1;
    std::int64_t max_lag_ns = 0;         // worst delay of a sendmmsg call's first query behind its deadline
    std::int64_t max_retry_stall_ns = 0; // longest wait for a full socket to take a batch (would_block)
    std::int64_t max_lag_at_ns = -1;     // when it happened, from the start
    std::uint64_t max_burst = 0;         // most queries sent in one wake-up
    std::uint64_t max_in_100us = 0;      // most queries whose sendmmsg started within one 100 us window
    std::vector<std::uint64_t> sent_per_socket;  // queries handed to each socket's sendmmsg (one entry a port)
    std::uint64_t syscalls = 0;          // sendmmsg or UDP_SEGMENT sendmsg calls
    std::uint64_t gso_calls = 0;         // of them UDP_SEGMENT sendmsg calls
    int gso_refused_errno = 0;           // the error that made this sender go back to sendmmsg (0: none)
    std::uint64_t wakeups = 0;           // times the sender slept and woke
    double cpu_s = 0;                    // user + system CPU time of the thread
    int last_cpu = -1;
    bool gave_up = false;                // stopped at the send bound (Plan::send_bound_s)
    SendStop stop = SendStop::schedule_sent;  // why the sender stopped
    std::int64_t stopped_ns = -1;        // when, CLOCK_MONOTONIC relative to the schedule start
};

// The first reply whose letter case proved that the server rewrote the query name's case.
struct CaseRewriteSeen {
    bool seen = false;
    std::size_t socket = 0;              // index into the pair's sockets (or flows)
    std::string address;                 // that socket's (flow's) source address and port
    std::uint16_t port = 0;
    std::uint16_t id = 0;
    std::uint64_t query_epoch = 0;       // the epoch of the query holding the ID
    std::uint64_t spelled_epoch = 0;     // the epoch the reply's letters spell
    CaseRewrite evidence = CaseRewrite::none;
    std::int64_t at_ns = -1;             // its arrival, CLOCK_MONOTONIC relative to the start
};

struct ReceiverStats {
    std::uint64_t received = 0;          // datagrams read
    std::uint64_t valid = 0;
    std::uint64_t late = 0;
    std::array<std::uint64_t, 16> rcode{};  // matched in time with this RCODE (index 0 unused)
    std::uint64_t nodata = 0;
    std::uint64_t truncated = 0;
    std::uint64_t malformed = 0;
    std::uint64_t unexpected = 0;
    std::uint64_t wrong_source = 0;      // parts of unexpected
    std::uint64_t unknown_id = 0;
    std::uint64_t wrong_question = 0;
    std::uint64_t duplicate = 0;
    std::uint64_t case_rewritten = 0;    // of unknown_id: replies whose letter case proves a case-rewriting server
    CaseRewriteSeen case_first;          // the first of them
    std::uint64_t case_bitmap_bytes = 0; // the bits kept per ID of wrapping sockets (flows)
    std::uint64_t final_drain = 0;       // datagrams read after the end time (until nothing was pending)
    std::int64_t final_drain_ns = 0;     // how long that took
    // Datagrams still waiting when the final read reached its deadline, then read and set aside
    // uncounted (their queries stay unanswered): the tester's loss.
    std::uint64_t unread_at_end = 0;
    std::uint64_t syscalls = 0;          // recvmmsg calls
    std::uint64_t wakeups = 0;           // epoll_wait returns
    double cpu_s = 0;
    int last_cpu = -1;
};

// Per second of the trial: queries by the second they were sent in (so loss per
// row is 1 - valid/sent); replies matching no query by the second they arrived.
struct SeriesRow {
    std::uint64_t sent = 0;
    std::uint64_t valid = 0;
    std::uint64_t late = 0;
    std::uint64_t failed = 0;            // rcode + nodata + truncated
    std::uint64_t unmatched = 0;         // malformed + unexpected + duplicate
};

struct PairResult {
    unsigned index = 0;
    SenderStats send;
    ReceiverStats receive;
    std::vector<std::uint16_t> ports;    // per socket (flows: empty, io.flows counts them)
    std::vector<std::string> source_addresses;  // per socket, beside ports
    int sender_cpu = -1;                 // asked pinning, -1: none
    int receiver_cpu = -1;
    std::vector<int> sender_allowed;     // affinity the thread really had
    std::vector<int> receiver_allowed;
};

struct TrialResult {
    std::vector<PairResult> pairs;
    LatencyHistogram latency{1};
    double latency_from_s = 0;           // the histogram covers queries sent this long after query 0 or later
    LatencyHistogram send_lag{1};        // per sendmmsg call: delay of its first query behind schedule
    std::vector<SeriesRow> series;
    std::int64_t start_realtime_ns = 0;
    double wall_s = 0;                   // from thread start to the last receiver's end
    double cpu_user_s = 0;               // whole process, during the trial
    double cpu_system_s = 0;
    long max_rss_kib = 0;                // peak resident set of the process
    bool interrupted = false;
    // The namespace's UDP error counters over the trial (other sockets of the namespace count too);
    // its checksum errors are in io.counters, as the backend attributes them.
    std::uint64_t udp_sndbuf_errors = 0;  // any socket's datagrams dropped on the way out (not attributed)
    bool udp_counters_read = false;
    // The devices the tester's sources route to the server by, and what each one's
    // root qdisc and driver dropped during the trial: the tester's own egress drops.
    std::vector<EgressDevice> egress;
    io::IoReport io;                      // the I/O backend (--io): its setup, GSO choice and own counters
};

// Runs the trial. Progress lines go to `progress` unless it is null. Setting
// `stop` (signal handler) ends sending early; receivers still wait one timeout.
// Throws StartError when sockets or threads cannot be set up.
TrialResult run_trial(const Plan& plan, std::ostream* progress, const std::atomic<bool>& stop);

}  // namespace xlatperf
