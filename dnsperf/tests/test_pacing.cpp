#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "pacing.hpp"

using xlatperf::Pacer;
using xlatperf::Schedule;

TEST_CASE("query k is due k / rate after the start") {
    const Schedule s(1000, 1, 10);
    CHECK(s.offset_ns(0) == 0);
    CHECK(s.offset_ns(1) == 1'000'000);
    CHECK(s.offset_ns(9) == 9'000'000);
    CHECK(s.window_s() == Approx(0.01));
    const Schedule third(3, 1, 3);
    CHECK(third.offset_ns(1) == 333'333'333);
    CHECK(third.offset_ns(2) == 666'666'667);
    CHECK(third.window_s() == Approx(1.0));
}

TEST_CASE("deadlines stay exact over long trials at high rates") {
    const Schedule s(333'333, 16, 0);
    for (const std::uint64_t k : {1ull, 1'000'000ull, 1'000'000'007ull, 3'600ull * 333'333}) {
        const long double exact = static_cast<long double>(k) * 1e9L / 333'333.0L;
        CHECK(std::fabs(static_cast<long double>(s.offset_ns(k)) - exact) <= 1.0L);
    }
}

TEST_CASE("threads split the schedule into interleaved shares that add up") {
    for (const unsigned threads : {1u, 2u, 3u, 16u}) {
        for (const std::uint64_t total : {0ull, 1ull, 15ull, 16ull, 17ull, 100'003ull}) {
            const Schedule s(1000, threads, total);
            std::uint64_t sum = 0;
            for (unsigned t = 0; t < threads; ++t) {
                const std::uint64_t n = s.thread_queries(t);
                sum += n;
                CHECK(n * threads <= total + threads);
                CHECK(n * threads + threads >= total);
                if (n > 0) CHECK(s.global_index(t, n - 1) < total);
                CHECK(s.global_index(t, n) >= total);
            }
            CHECK(sum == total);
        }
    }
    const Schedule s(1000, 4, 100);
    // Thread 2's queries are k = 2, 6, 10, ...: one slot of 1/rate after thread 1's.
    CHECK(s.global_index(2, 0) == 2);
    CHECK(s.global_index(2, 1) == 6);
    CHECK(s.offset_ns(s.global_index(2, 1)) - s.offset_ns(s.global_index(1, 1)) == 1'000'000);
    CHECK(s.offset_ns(s.global_index(0, 1)) - s.offset_ns(s.global_index(0, 0)) == 4'000'000);
}

TEST_CASE("the pacer returns at or after the deadline, or early on stop") {
    Pacer pacer;
    std::atomic<bool> stop{false};
    for (const std::int64_t wait : {0, 1'000, 100'000, 2'000'000}) {
        const std::int64_t deadline = xlatperf::monotonic_ns() + wait;
        pacer.wait_until(deadline, stop);
        CHECK(xlatperf::monotonic_ns() >= deadline);
    }
    stop = true;
    const std::int64_t far = xlatperf::monotonic_ns() + 3'600'000'000'000;
    pacer.wait_until(far, stop);
    CHECK(xlatperf::monotonic_ns() < far);
}

TEST_CASE("the realtime offset is not shifted by a preemption between two clock reads") {
    // Fake clocks: REALTIME is MONOTONIC + 1 000 000 000 ns; each read advances time 20 ns, and the
    // thread is away for 300 us right after the first MONOTONIC read of the first try.
    constexpr std::int64_t kTrueOffset = 1'000'000'000;
    std::int64_t t = 5'000'000;
    int reads = 0;
    auto monotonic = [&] {
        const std::int64_t now = t;
        t += 20;
        if (++reads == 1) t += 300'000;
        return now;
    };
    auto realtime = [&] {
        const std::int64_t now = t + kTrueOffset;
        t += 20;
        ++reads;
        return now;
    };
    const std::int64_t offset = xlatperf::realtime_minus_monotonic_ns(monotonic, realtime);
    // A plain pair of reads (MONOTONIC, then REALTIME) would be 300 020 ns off: a 10 us reply would
    // seem to arrive before its query.
    CHECK(std::llabs(offset - kTrueOffset) <= 20);
    CHECK(reads == 6);  // the first try was wide, the second tight
}

TEST_CASE("the realtime offset of this machine's clocks is read tightly") {
    const std::int64_t a = xlatperf::realtime_minus_monotonic_ns();
    const std::int64_t b = xlatperf::realtime_minus_monotonic_ns();
    CHECK(std::llabs(a - b) < 1'000'000);  // the same offset twice (a wall-clock step aside)
}
