#include "pacing.hpp"

#include <algorithm>
#include <ctime>
#include <sys/prctl.h>

namespace xlatperf {
namespace {

std::int64_t now_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

constexpr std::int64_t kMaxSleepNs = 100'000'000;  // re-check `stop` this often
constexpr std::int64_t kMinEarlyNs = 2'000;
constexpr std::int64_t kMaxEarlyNs = 200'000;

}  // namespace

std::int64_t monotonic_ns() { return now_ns(CLOCK_MONOTONIC); }
std::int64_t realtime_ns() { return now_ns(CLOCK_REALTIME); }
std::int64_t realtime_minus_monotonic_ns() { return realtime_minus_monotonic_ns(monotonic_ns, realtime_ns); }

Pacer::Pacer() { prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

void Pacer::wait_until(std::int64_t deadline_ns, const std::atomic<bool>& stop) {
    std::int64_t now = monotonic_ns();
    const bool spin = deadline_ns - now >= kSpinShareInverse * early_ns_;
    const std::int64_t early = spin ? early_ns_ : 0;
    while (deadline_ns - now > early && !stop.load(std::memory_order_relaxed)) {
        const std::int64_t target = std::min(deadline_ns - early, now + kMaxSleepNs);
        const timespec ts{static_cast<time_t>(target / 1'000'000'000), static_cast<long>(target % 1'000'000'000)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
        now = monotonic_ns();
        if (target == deadline_ns - early) {
            // Aim future wake-ups so that an oversleep like this one would just reach the deadline.
            const std::int64_t overslept = now - target;
            early_ns_ = std::clamp((early_ns_ * 7 + overslept * 3 / 2) / 8, kMinEarlyNs, kMaxEarlyNs);
        }
    }
    if (!spin) return;
    while (now < deadline_ns && !stop.load(std::memory_order_relaxed)) {
        cpu_relax();
        now = monotonic_ns();
    }
}

}  // namespace xlatperf
