#pragma once
// The absolute send schedule and the sleep-then-spin wait that keeps to it.
//
// Query k (0-based, over all threads) is due at start + k / rate. Thread i of N
// sends the queries k = i, i + N, i + 2N, ...: each thread runs at rate / N and
// the threads are phase-interleaved by 1 / rate. Deadlines are computed from k,
// never accumulated, so a late send does not shift any later deadline.

#include <atomic>
#include <cstdint>

namespace xlatperf {

class Schedule {
public:
    Schedule(double rate_qps, unsigned threads, std::uint64_t total_queries)
        : ns_per_query_(1e9 / rate_qps), rate_qps_(rate_qps), threads_(threads), total_(total_queries) {}

    // Offset of query k from the start, ns.
    std::int64_t offset_ns(std::uint64_t k) const {
        return static_cast<std::int64_t>(static_cast<double>(k) * ns_per_query_ + 0.5);
    }
    // Global index of the j-th query of thread `thread`.
    std::uint64_t global_index(unsigned thread, std::uint64_t j) const { return j * threads_ + thread; }
    // Number of queries thread `thread` sends.
    std::uint64_t thread_queries(unsigned thread) const {
        return total_ / threads_ + (thread < total_ % threads_ ? 1 : 0);
    }
    // The time the schedule spans: total / rate, s.
    double window_s() const { return static_cast<double>(total_) / rate_qps_; }

    std::uint64_t total() const { return total_; }
    unsigned threads() const { return threads_; }
    double rate_qps() const { return rate_qps_; }

private:
    double ns_per_query_;
    double rate_qps_;
    unsigned threads_;
    std::uint64_t total_;
};

// CLOCK_MONOTONIC and CLOCK_REALTIME in ns.
std::int64_t monotonic_ns();
std::int64_t realtime_ns();

// CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns (to move the kernel's receive stamps,
// which are on CLOCK_REALTIME, to CLOCK_MONOTONIC). Read as a REALTIME read between
// two MONOTONIC reads, the tightest of up to three tries: a thread preempted between
// two plain reads would shift the offset by the time it was away, and a reply faster
// than that would seem to arrive before its query (seen: one bpf reply in 10 000).
std::int64_t realtime_minus_monotonic_ns();
// The same rule on given clocks (tests).
template <class Monotonic, class Realtime>
std::int64_t realtime_minus_monotonic_ns(Monotonic&& monotonic, Realtime&& realtime) {
    constexpr std::int64_t kTightNs = 1'000;
    std::int64_t best_width = -1;
    std::int64_t offset = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::int64_t before = monotonic();
        const std::int64_t real = realtime();
        const std::int64_t after = monotonic();
        const std::int64_t width = after - before;
        if (best_width < 0 || width < best_width) {
            best_width = width;
            offset = real - (before + width / 2);
        }
        if (best_width <= kTightNs) break;
    }
    return offset;
}

// Waits until a CLOCK_MONOTONIC deadline. It sleeps (absolute clock_nanosleep,
// timer slack 1 ns) until shortly before the deadline, then spins; how early it
// wakes follows the oversleep it observes (tens of microseconds on a VM). It
// spins only when the wait is at least kSpinShareInverse times that margin, so
// spinning never takes more than about 1/kSpinShareInverse of a core; shorter
// waits (high rates, where queries leave in batches anyway) just sleep and
// accept the oversleep. Returns early when `stop` becomes true (checked at least
// every 100 ms).
class Pacer {
public:
    static constexpr std::int64_t kSpinShareInverse = 8;

    Pacer();  // sets this thread's timer slack to 1 ns (PR_SET_TIMERSLACK)
    void wait_until(std::int64_t deadline_ns, const std::atomic<bool>& stop);
    std::int64_t early_ns() const { return early_ns_; }

private:
    std::int64_t early_ns_ = 20'000;
};

}  // namespace xlatperf
