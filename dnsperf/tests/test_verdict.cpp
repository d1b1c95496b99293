// The verdict, one case per reason: a trial result built by hand (as the thread
// pairs would leave it) must be judged ok or tester-limited for exactly the
// reason it carries, with the numbers in the sentence.
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "verdict.hpp"

using namespace xlatperf;

namespace {

// 1000 queries at 1000 queries/s: a 1 s schedule, tolerance 2 ms, max lag 20 ms.
Plan plan_of_1000() {
    Plan plan;
    plan.config.rate_qps = 1000;
    plan.config.max_lag_s = 0.02;
    plan.total_queries = 1000;
    plan.scheduled_window_s = 1.0;
    plan.effective_send_tolerance_s = 0.002;
    plan.send_bound_s = 1.022;
    return plan;
}

// Two pairs that sent everything on time and got every reply.
TrialResult clean_trial() {
    TrialResult trial;
    for (unsigned i = 0; i < 2; ++i) {
        PairResult pair;
        pair.index = i;
        pair.send.sent = 500;
        pair.send.first_send_ns = 0;
        pair.send.last_send_ns = 999'000'000;
        pair.send.max_lag_ns = 100'000;
        pair.receive.received = 500;
        pair.receive.valid = 500;
        trial.pairs.push_back(pair);
    }
    return trial;
}

Verdict verdict_of(const Plan& plan, const TrialResult& trial) {
    const Totals totals = sum(plan, trial);
    return judge(plan, trial, totals, send_figures(plan, totals));
}

bool mentions(const Verdict& v, const std::string& text) {
    for (const auto& reason : v.reasons) {
        if (reason.find(text) != std::string::npos) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("sum adds the pairs and takes the extremes of their times") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[1].send.first_send_ns = 5;
    trial.pairs[0].send.max_lag_ns = 7'000'000;
    trial.pairs[1].receive.valid = 490;
    trial.pairs[1].receive.rcode[3] = 4;
    trial.pairs[1].receive.late = 2;
    const Totals t = sum(plan, trial);
    CHECK(t.scheduled == 1000);
    CHECK(t.sent == 1000);
    CHECK(t.valid == 990);
    CHECK(t.rcode_errors() == 4);
    CHECK(t.answered() == 996);
    CHECK(t.unanswered() == 4);
    CHECK(t.loss_ratio() == Approx(0.01));
    CHECK(t.first_send_ns == 0);
    CHECK(t.last_send_ns == 999'000'000);
    CHECK(t.max_lag_ns == 7'000'000);
}

TEST_CASE("a clean trial is ok, whatever the DUT lost") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[0].receive.valid = 100;  // heavy loss at the DUT is the DUT's number, not the tester's
    const Verdict v = verdict_of(plan, trial);
    CHECK_FALSE(v.tester_limited);
    CHECK(v.reasons.empty());
    CHECK(std::string(v.status()) == "ok");
}

TEST_CASE("an interrupted trial is tester-limited") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.interrupted = true;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "interrupted by a signal"));
}

TEST_CASE("unsent queries are tester-limited, with their errno counts and the send bound") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[0].send.sent = 470;
    trial.pairs[0].send.send_errors = 30;
    trial.pairs[0].send.errno_counts[EPERM] = 30;
    trial.pairs[1].send.gave_up = true;
    trial.pairs[1].send.stop = SendStop::bound;
    trial.pairs[1].send.stopped_ns = 1'025'000'000;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "30 of 1000 scheduled queries were not sent"));
    CHECK(mentions(v, "EPERM x30"));
    CHECK(mentions(v, "the senders stopped 1.025 s after the start, at the send bound of 1.022 s"));
}

TEST_CASE("a send window longer than the tolerance is tester-limited") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[1].send.last_send_ns = 1'004'000'000;  // 5 ms over a 1 s schedule, tolerance 2 ms
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "5.000 ms longer, beyond the tolerance of 2.000 ms"));
}

TEST_CASE("a window within the tolerance is ok") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[1].send.last_send_ns = 1'000'500'000;  // 1.5 ms over, tolerance 2 ms
    CHECK_FALSE(verdict_of(plan, trial).tester_limited);
}

TEST_CASE("a query sent later than --max-lag is tester-limited; --max-lag 0 turns the check off") {
    Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[0].send.max_lag_ns = 25'000'000;
    Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "25.000 ms behind its schedule, more than --max-lag 20.000 ms"));
    plan.config.max_lag_s = 0;
    CHECK_FALSE(verdict_of(plan, trial).tester_limited);
}

TEST_CASE("a ring overrun is tester-limited") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[1].send.ring_overruns = 3;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "3 queries reused the slot"));
}

TEST_CASE("drops on the tester's own receive path are tester-limited, whichever backend counted them") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.io.counters.tester_drops = 12;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "12 replies were dropped by the tester's own receive path"));
    CHECK(sum(plan, trial).tester_drops == 12);
}

TEST_CASE("a final read cut at its deadline is tester-limited; a long one that finished is not") {
    Plan plan = plan_of_1000();
    plan.config.timeout_s = 0.25;
    TrialResult trial = clean_trial();
    trial.pairs[1].receive.final_drain = 9000;
    trial.pairs[1].receive.final_drain_ns = 20'000'000;
    CHECK_FALSE(verdict_of(plan, trial).tester_limited);
    trial.pairs[1].receive.unread_at_end = 7000;
    trial.pairs[0].receive.unread_at_end = 3000;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "10000 datagrams still waited one timeout (250.000 ms) after the receivers' end time"));
    const Totals t = sum(plan, trial);
    CHECK(t.final_drain == 9000);
    CHECK(t.unread_at_end == 10000);
}

TEST_CASE("several reasons are all given") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.interrupted = true;
    trial.pairs[1].send.ring_overruns = 1;
    trial.io.counters.tester_drops = 1;
    CHECK(verdict_of(plan, trial).reasons.size() == 3);
}

TEST_CASE("sends retried on a full socket are tester-limited, with the count and the longest stall") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[0].send.would_block = 4;
    trial.pairs[1].send.would_block = 2;
    trial.pairs[1].send.max_retry_stall_ns = 50'000'000;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "6 sendmmsg calls found the tester's socket send buffer full"));
    CHECK(mentions(v, "the longest stall was 50.000 ms"));
}

TEST_CASE("checksum errors are the DUT's, not the tester's; most replies failing it names the veth offload") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.pairs[0].receive.valid = 460;
    trial.pairs[0].receive.received = 460;
    trial.io.counters.checksum_errors = 40;
    Totals t = sum(plan, trial);
    CHECK(t.checksum_errors == 40);
    CHECK(t.unanswered() == 40);
    Verdict v = verdict_of(plan, trial);
    CHECK_FALSE(v.tester_limited);
    CHECK(v.warnings.empty());  // a few bad checksums: the DUT's, nothing to explain
    // Most replies bad: one line with the likely cause and the fix; the status stays.
    trial.pairs[0].receive.valid = 0;
    trial.pairs[0].receive.received = 0;
    trial.pairs[1].receive.valid = 0;
    trial.pairs[1].receive.received = 10;
    trial.io.counters.checksum_errors = 990;
    v = verdict_of(plan, trial);
    CHECK_FALSE(v.tester_limited);
    REQUIRE(v.warnings.size() == 1);
    CHECK_THAT(v.warnings[0], Catch::Contains("most replies failed their UDP checksum (990 of 1000 datagrams)") &&
                                  Catch::Contains("veth with tx checksum offload") &&
                                  Catch::Contains("ethtool -K IF tx off"));
    CHECK(v.warnings[0].find('\n') == std::string::npos);
}

TEST_CASE("queries dropped at the tester's own egress are tester-limited, not the DUT's loss") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.udp_sndbuf_errors = 17;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "the tester's egress dropped 17 UDP datagrams"));
}

TEST_CASE("egress drops are the tester's own devices': qdisc drops and tx_dropped, not the namespace's") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.udp_sndbuf_errors = 100;  // another process's drops on another device
    EgressDevice veth;
    veth.name = "veth0";
    veth.qdisc = "tbf";
    veth.read = true;
    trial.egress = {veth};
    Totals t = sum(plan, trial);
    CHECK(t.egress_from_devices);
    CHECK(t.egress_drops == 0);
    CHECK(t.namespace_sndbuf_errors == 100);
    CHECK_FALSE(verdict_of(plan, trial).tester_limited);

    trial.egress[0].qdisc_drops = 5;
    trial.egress[0].tx_dropped = 2;
    t = sum(plan, trial);
    CHECK(t.egress_drops == 7);
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "the tester's egress dropped 7 packets"));
    CHECK(mentions(v, "veth0: 5 by its tbf qdisc, 2 tx_dropped"));

    // A device that could not be read: the namespace-wide counter stands in, and says so.
    trial.egress[0].read = false;
    t = sum(plan, trial);
    CHECK_FALSE(t.egress_from_devices);
    CHECK(t.egress_drops == 100);
    CHECK(mentions(verdict_of(plan, trial), "since its egress devices could not be read"));
}

TEST_CASE("replies on AF_XDP queues left unbound are the tester's loss, counted and warned of") {
    const Plan plan = plan_of_1000();
    TrialResult trial = clean_trial();
    trial.io.mode = "xdp";
    trial.io.xdp.interface = "veth0";
    trial.io.xdp.queues = 1;
    trial.io.xdp.interface_queues = 2;
    trial.io.xdp.passed = 600;  // other traffic too: only the program's count of replies is the tester's
    CHECK_FALSE(verdict_of(plan, trial).tester_limited);
    CHECK(verdict_of(plan, trial).warnings.empty());
    trial.io.counters.unbound_queue_replies = 480;
    const Verdict v = verdict_of(plan, trial);
    CHECK(v.tester_limited);
    CHECK(mentions(v, "480 replies arrived on receive queues of veth0 without a tester socket"));
    REQUIRE(v.warnings.size() == 1);
    CHECK_THAT(v.warnings[0], Catch::Contains("veth0 has 2 receive queues and the tester bound 1") &&
                                  Catch::Contains("480 replies landed on another queue"));
    CHECK(sum(plan, trial).unbound_queue_replies == 480);
}
