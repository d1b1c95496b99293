#pragma once
// What a trial means, in one place: the totals summed over the thread pairs and
// the verdict (ok or tester-limited, with one sentence per reason).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "trial.hpp"

namespace xlatperf {

struct Totals {
    std::uint64_t scheduled = 0;
    std::uint64_t sent = 0;
    std::uint64_t send_errors = 0;
    std::uint64_t unsent = 0;
    std::uint64_t would_block = 0;
    std::uint64_t ring_overruns = 0;
    std::uint64_t received = 0;
    std::uint64_t valid = 0;
    std::uint64_t late = 0;
    std::array<std::uint64_t, 16> rcode{};
    std::uint64_t nodata = 0;
    std::uint64_t truncated = 0;
    std::uint64_t malformed = 0;
    std::uint64_t unexpected = 0;
    std::uint64_t wrong_source = 0;
    std::uint64_t unknown_id = 0;
    std::uint64_t wrong_question = 0;
    std::uint64_t duplicate = 0;
    std::uint64_t case_rewritten = 0;  // of unknown_id: replies whose letter case proves a case-rewriting server
    std::uint64_t final_drain = 0;     // datagrams the receivers read after their end time
    std::int64_t final_drain_ns = 0;   // the longest final read of a receiver
    std::uint64_t unread_at_end = 0;   // datagrams still waiting at the receivers' final read's deadline (the tester's)
    std::uint64_t tester_drops = 0;    // replies the tester's own receive path dropped (io.counters: the tester's)
    std::uint64_t unbound_queue_replies = 0;  // replies where the tester had no reader (io.counters: the tester's)
    std::uint64_t checksum_errors = 0; // replies with a bad UDP checksum during the trial (io.counters: the DUT's fault)
    std::uint64_t egress_drops = 0;    // drops at the tester's egress devices (root qdisc + tx_dropped), else SndbufErrors
    bool egress_from_devices = false;  // egress_drops came from the devices (false: namespace-wide SndbufErrors)
    std::uint64_t namespace_sndbuf_errors = 0;  // the namespace's UDP SndbufErrors: any socket, not attributed
    std::uint64_t answered() const;    // matched replies: valid, late, rcode, nodata, truncated
    std::uint64_t unanswered() const;  // sent - answered
    std::uint64_t rcode_errors() const;
    double loss_ratio() const;         // 1 - valid / sent (1 when nothing was sent)
    std::int64_t first_send_ns = -1;   // earliest first send over the senders, from the start
    std::int64_t last_send_ns = -1;    // latest last send over the senders, from the start
    std::int64_t max_lag_ns = 0;
    std::int64_t max_retry_stall_ns = 0;
    std::uint64_t max_burst = 0;
    std::uint64_t max_in_100us = 0;    // the largest of the senders' (a lower bound of all threads together)
    std::uint64_t gso_calls = 0;       // UDP_SEGMENT sends (each one batch of queries)
    SendStop stop = SendStop::schedule_sent;  // send-bound if any sender stopped there, else signal, failure
    std::int64_t stopped_ns = -1;      // when the last sender stopped, from the start
    std::array<std::uint64_t, 256> errno_counts{};
};

Totals sum(const Plan& plan, const TrialResult& trial);

struct SendFigures {
    double scheduled_window_s = 0;
    double window_s = 0;               // (last send - start) + 1/rate; equals scheduled when on time
    double achieved_rate_qps = 0;      // sent / window_s
    double excess_s = 0;               // window_s - scheduled_window_s
};

SendFigures send_figures(const Plan& plan, const Totals& totals);

struct Verdict {
    bool tester_limited = false;
    std::vector<std::string> reasons;  // each one sentence with numbers and units
    std::vector<std::string> warnings; // what the server (or the path to it) did that makes its loss mean less (JSON `warnings`; the status stays)
    const char* status() const { return tester_limited ? "tester-limited" : "ok"; }
};

// The warning when most replies fail their checksum (`bad` of `replies` datagrams): its likely cause, a
// veth peer with tx checksum offload on, and the fix.
std::string checksum_offload_hint(std::uint64_t bad, std::uint64_t replies);

Verdict judge(const Plan& plan, const TrialResult& trial, const Totals& totals, const SendFigures& send);

}  // namespace xlatperf
