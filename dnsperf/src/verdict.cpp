#include "verdict.hpp"

#include <algorithm>

#include "format.hpp"

namespace xlatperf {

std::uint64_t Totals::answered() const { return valid + late + rcode_errors() + nodata + truncated; }
std::uint64_t Totals::unanswered() const { return sent > answered() ? sent - answered() : 0; }
std::uint64_t Totals::rcode_errors() const {
    std::uint64_t n = 0;
    for (unsigned r = 1; r < 16; ++r) n += rcode[r];
    return n;
}
double Totals::loss_ratio() const {
    return sent == 0 ? 1.0 : 1.0 - static_cast<double>(valid) / static_cast<double>(sent);
}

Totals sum(const Plan& plan, const TrialResult& trial) {
    Totals t;
    t.scheduled = plan.total_queries;
    t.checksum_errors = trial.io.counters.checksum_errors;
    t.tester_drops = trial.io.counters.tester_drops;
    t.unbound_queue_replies = trial.io.counters.unbound_queue_replies;
    t.namespace_sndbuf_errors = trial.udp_sndbuf_errors;
    // The tester's own egress drops are its devices' (a qdisc or driver drop that the
    // socket never hears of counts too; another process's drops on other devices do
    // not). Only when a device could not be read does the namespace-wide counter stand in.
    t.egress_from_devices = !trial.egress.empty() &&
                            std::all_of(trial.egress.begin(), trial.egress.end(), [](const EgressDevice& d) { return d.read; });
    if (t.egress_from_devices) {
        for (const EgressDevice& d : trial.egress) t.egress_drops += d.qdisc_drops + d.tx_dropped;
    } else {
        t.egress_drops = trial.udp_sndbuf_errors;
    }
    for (const PairResult& p : trial.pairs) {
        const SenderStats& s = p.send;
        const ReceiverStats& r = p.receive;
        t.sent += s.sent;
        t.send_errors += s.send_errors;
        t.unsent += s.unsent;
        t.would_block += s.would_block;
        t.ring_overruns += s.ring_overruns;
        for (std::size_t e = 0; e < s.errno_counts.size(); ++e) t.errno_counts[e] += s.errno_counts[e];
        if (s.first_send_ns >= 0 && (t.first_send_ns < 0 || s.first_send_ns < t.first_send_ns)) {
            t.first_send_ns = s.first_send_ns;
        }
        t.last_send_ns = std::max(t.last_send_ns, s.last_send_ns);
        t.max_lag_ns = std::max(t.max_lag_ns, s.max_lag_ns);
        t.max_retry_stall_ns = std::max(t.max_retry_stall_ns, s.max_retry_stall_ns);
        t.max_burst = std::max(t.max_burst, s.max_burst);
        t.max_in_100us = std::max(t.max_in_100us, s.max_in_100us);
        t.gso_calls += s.gso_calls;
        t.stopped_ns = std::max(t.stopped_ns, s.stopped_ns);
        // The most telling reason wins: the bound, then a signal, then a failed thread.
        const auto rank = [](SendStop stop) {
            switch (stop) {
            case SendStop::bound: return 3;
            case SendStop::signal: return 2;
            case SendStop::failure: return 1;
            case SendStop::schedule_sent: return 0;
            }
            return 0;
        };
        if (rank(s.stop) > rank(t.stop)) t.stop = s.stop;
        t.received += r.received;
        t.valid += r.valid;
        t.late += r.late;
        for (unsigned c = 0; c < 16; ++c) t.rcode[c] += r.rcode[c];
        t.nodata += r.nodata;
        t.truncated += r.truncated;
        t.malformed += r.malformed;
        t.unexpected += r.unexpected;
        t.wrong_source += r.wrong_source;
        t.unknown_id += r.unknown_id;
        t.wrong_question += r.wrong_question;
        t.duplicate += r.duplicate;
        t.case_rewritten += r.case_rewritten;
        t.final_drain += r.final_drain;
        t.final_drain_ns = std::max(t.final_drain_ns, r.final_drain_ns);
        t.unread_at_end += r.unread_at_end;
    }
    return t;
}

SendFigures send_figures(const Plan& plan, const Totals& totals) {
    SendFigures f;
    f.scheduled_window_s = plan.scheduled_window_s;
    if (totals.last_send_ns >= 0) {
        f.window_s = seconds(totals.last_send_ns) + 1.0 / plan.config.rate_qps;
        f.achieved_rate_qps = static_cast<double>(totals.sent) / f.window_s;
    }
    f.excess_s = f.window_s - f.scheduled_window_s;
    return f;
}

std::string checksum_offload_hint(std::uint64_t bad, std::uint64_t replies) {
    return "most replies failed their UDP checksum (" + std::to_string(bad) + " of " + std::to_string(replies) +
           " datagrams): the likely cause is a peer across a veth with tx checksum offload on, which sends "
           "partial checksums that a reader of raw frames (--io xdp) sees as bad; turn it off on the peer's "
           "interface (ethtool -K IF tx off) and measure again";
}

Verdict judge(const Plan& plan, const TrialResult& trial, const Totals& t, const SendFigures& send) {
    Verdict v;
    const auto limit = [&v](std::string reason) {
        v.tester_limited = true;
        v.reasons.push_back(std::move(reason));
    };
    if (trial.interrupted) limit("the trial was interrupted by a signal before the schedule ended");
    if (t.sent < t.scheduled) {
        std::string why = std::to_string(t.scheduled - t.sent) + " of " + std::to_string(t.scheduled) +
                          " scheduled queries were not sent";
        if (t.send_errors > 0) {
            why += " (" + std::to_string(t.send_errors) + " send errors:";
            for (std::size_t e = 0; e < t.errno_counts.size(); ++e) {
                if (t.errno_counts[e] > 0) why += " " + errno_name(e) + " x" + std::to_string(t.errno_counts[e]);
            }
            why += ")";
        }
        if (t.stop == SendStop::bound) {
            why += "; the senders stopped " + fixed(seconds(t.stopped_ns), 3) + " s after the start, at the send bound of " +
                   fixed(plan.send_bound_s, 3) + " s (window + send tolerance + --max-lag): every later query "
                   "would have been late";
        }
        limit(why);
    }
    if (t.sent > 0 && send.excess_s > plan.effective_send_tolerance_s) {
        limit("the send window was " + fixed(send.window_s, 6) + " s for a schedule of " +
              fixed(send.scheduled_window_s, 6) + " s: " + duration_text(send.excess_s) +
              " longer, beyond the tolerance of " + duration_text(plan.effective_send_tolerance_s) +
              " (achieved " + fixed(send.achieved_rate_qps, 1) + " of " + fixed(plan.config.rate_qps, 1) +
              " queries/s)");
    }
    if (plan.config.max_lag_s > 0 && seconds(t.max_lag_ns) > plan.config.max_lag_s) {
        limit("a sendmmsg batch was sent " + duration_text(seconds(t.max_lag_ns)) + " behind its schedule, more than --max-lag " +
              duration_text(plan.config.max_lag_s));
    }
    if (t.would_block > 0) {
        limit(std::to_string(t.would_block) +
              " sendmmsg calls found the tester's socket send buffer full (EAGAIN/ENOBUFS) and were retried; "
              "the longest stall was " + duration_text(seconds(t.max_retry_stall_ns)) +
              ": raise --sndbuf or lower the rate");
    }
    if (t.egress_drops > 0 && t.egress_from_devices) {
        std::string where;
        for (const EgressDevice& d : trial.egress) {
            if (d.qdisc_drops + d.tx_dropped == 0) continue;
            where += (where.empty() ? "" : ", ") + d.name + ": " + std::to_string(d.qdisc_drops) + " by its " +
                     (d.qdisc.empty() ? std::string("root") : d.qdisc) + " qdisc, " + std::to_string(d.tx_dropped) +
                     " tx_dropped";
        }
        limit("the tester's egress dropped " + std::to_string(t.egress_drops) +
              " packets after the send calls accepted them (" + where +
              "), so they count as sent but never left" +
              std::string(t.gso_calls > 0 ? " (a GSO batch the qdisc took whole counts once)" : "") +
              ": lower the rate or give the tester's interface a longer queue");
    } else if (t.egress_drops > 0) {
        limit("the tester's egress dropped " + std::to_string(t.egress_drops) +
              " UDP datagrams after sendmmsg accepted them (SndbufErrors of its network namespace, since its egress "
              "devices could not be read: any socket of the namespace counts there), so they count as sent but never "
              "left: lower the rate or give the tester's interface a longer queue");
    }
    if (t.ring_overruns > 0) {
        limit(std::to_string(t.ring_overruns) +
              " queries reused the slot of a query still inside its timeout (a send burst beyond rate x timeout "
              "per socket)");
    }
    if (t.unread_at_end > 0) {
        limit(std::to_string(t.unread_at_end) + " datagrams still waited one timeout (" +
              duration_text(plan.config.timeout_s) + ") after the receivers' end time, when their final read "
              "stopped; they were set aside unread and their queries count as unanswered, the tester's loss: "
              "give the receivers more CPU");
    }
    if (t.tester_drops > 0) {
        limit(std::to_string(t.tester_drops) +
              " replies were dropped by the tester's own receive path (a full socket receive buffer, or a full "
              "AF_XDP ring): raise --rcvbuf (--xdp-frames) or give the receivers more CPU");
    }
    const io::XdpReport& x = trial.io.xdp;
    if (t.unbound_queue_replies > 0) {
        limit(std::to_string(t.unbound_queue_replies) + " replies arrived on receive queues of " + x.interface +
              " without a tester socket (it has " + std::to_string(x.interface_queues) + ", the tester bound " +
              std::to_string(x.queues) + ") and went to the kernel; their queries count as unanswered, the "
              "tester's loss: bind every queue (--threads, --xdp-queue) or steer the replies to the bound ones "
              "(docs/tester.md, What a real NIC needs)");
    }
    if (t.case_rewritten > 0) {
        v.warnings.push_back(
            "the server rewrote the letter case of the query name: " + std::to_string(t.case_rewritten) +
            " replies spelled a 0x20 epoch their query did not carry, which no held reply explains, and match no "
            "query (counted unexpected, their queries unanswered), so the loss is the case rewrite's, not the "
            "server's capacity: measure with a server that echoes the case it received (RFC 4343)");
    }
    if (t.unbound_queue_replies > 0) {
        v.warnings.push_back(
            x.interface + " has " + std::to_string(x.interface_queues) + " receive queues and the tester bound " +
            std::to_string(x.queues) + ": " + std::to_string(t.unbound_queue_replies) +
            " replies landed on another queue and went to the kernel, so part of the loss is the tester's: bind "
            "every queue (--threads, --xdp-queue) or steer the replies to the bound ones");
    }
    if (x.encap.wrong_ce > 0) {
        v.warnings.push_back(
            std::to_string(x.encap.wrong_ce) + " replies were encapsulated to another CE than the one their inner "
            "destination and port give (io.encap.wrong_ce): the BR built the wrong " +
            (x.encap.mode == "lw4o6" ? std::string("lwB4 address (binding)") : std::string("MAP address")) +
            "; they match no query, whose loss is the BR's");
    }
    // Most replies failing their checksum is rarely a DUT that computes checksums wrong: a peer across a
    // veth with tx checksum offload on sends partial checksums, which a reader of raw frames sees as bad.
    if (t.checksum_errors > 0 && t.checksum_errors > t.received) {
        v.warnings.push_back(
            checksum_offload_hint(t.checksum_errors, t.checksum_errors + t.received));
    }
    return v;
}

}  // namespace xlatperf
