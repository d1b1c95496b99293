// A test seam, loaded with LD_PRELOAD into xlatperf: sendmmsg call number
// XLATPERF_SHIM_CALL (counting only full batches of XLATPERF_SHIM_BATCH messages)
// stalls for XLATPERF_SHIM_MS milliseconds, either sleeping inside the call as a
// preempted sender would (XLATPERF_SHIM_MODE=sleep) or by failing with EAGAIN
// for that long, as a full socket send buffer does (XLATPERF_SHIM_MODE=eagain).
// With XLATPERF_SHIM_STALL_AT_QUERY=Q instead, the call that carries the Q-th
// message (counting from 1 over all calls) sleeps XLATPERF_SHIM_MS inside.
// With XLATPERF_SHIM_FAIL_THREAD=N, the N-th pthread_create fails with EAGAIN.
// With XLATPERF_SHIM_RECV_AFTER_MS=T, the first recvmmsg call T ms or more after
// the first one that returned data sleeps XLATPERF_SHIM_RECV_MS ms before reading
// (a receiver preempted near its end time), and with XLATPERF_SHIM_RECV_EACH_MS=E
// every later call sleeps E ms (a receiver too slow to read what is pending).
// With XLATPERF_SHIM_STEP_S=S, CLOCK_REALTIME steps by S seconds (may be negative)
// XLATPERF_SHIM_STEP_AFTER_MS after the process first read it: clock_gettime and
// the kernel's receive timestamps (SCM_TIMESTAMPNS) that recvmmsg returns both
// move, as a real step of the wall clock moves both.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/socket.h>
#include <thread>
#include <time.h>

namespace {

using SendmmsgFn = int (*)(int, mmsghdr*, unsigned, int);

long env_number(const char* name, long fallback) {
    const char* text = std::getenv(name);
    return text != nullptr ? std::strtol(text, nullptr, 10) : fallback;
}

std::atomic<long> g_full_calls{0};
std::atomic<long> g_eagain_until_ms{-1};

long now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

using ClockFn = int (*)(clockid_t, timespec*);

ClockFn real_clock() {
    static const auto real = reinterpret_cast<ClockFn>(dlsym(RTLD_NEXT, "clock_gettime"));
    return real;
}

std::int64_t monotonic_now_ns() {
    timespec ts{};
    real_clock()(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The wall-clock step in force now (0 before it happens).
std::int64_t step_ns() {
    static const double step_s = std::getenv("XLATPERF_SHIM_STEP_S") ? std::strtod(std::getenv("XLATPERF_SHIM_STEP_S"), nullptr) : 0;
    static const long after_ms = env_number("XLATPERF_SHIM_STEP_AFTER_MS", 0);
    static std::atomic<std::int64_t> first_ns{-1};
    if (step_s == 0) return 0;
    const std::int64_t now = monotonic_now_ns();
    std::int64_t unset = -1;
    first_ns.compare_exchange_strong(unset, now);
    return now - first_ns.load() >= after_ms * 1'000'000 ? static_cast<std::int64_t>(step_s * 1e9) : 0;
}

void shift(timespec& ts, std::int64_t by_ns) {
    const std::int64_t ns = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec + by_ns;
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
}

}  // namespace

extern "C" int clock_gettime(clockid_t clock, timespec* ts) {
    const int result = real_clock()(clock, ts);
    if (result == 0 && clock == CLOCK_REALTIME) shift(*ts, step_ns());
    return result;
}

extern "C" int sendmmsg(int fd, mmsghdr* messages, unsigned count, int flags) {
    static const auto real = reinterpret_cast<SendmmsgFn>(dlsym(RTLD_NEXT, "sendmmsg"));
    static const long stall_call = env_number("XLATPERF_SHIM_CALL", -1);
    static const long stall_ms = env_number("XLATPERF_SHIM_MS", 50);
    static const long batch = env_number("XLATPERF_SHIM_BATCH", 64);
    static const bool eagain = std::getenv("XLATPERF_SHIM_MODE") != nullptr &&
                               std::strcmp(std::getenv("XLATPERF_SHIM_MODE"), "eagain") == 0;
    const long until = g_eagain_until_ms.load();
    if (until >= 0 && now_ms() < until) {
        errno = EAGAIN;
        return -1;
    }
    static const long stall_at_query = env_number("XLATPERF_SHIM_STALL_AT_QUERY", -1);
    static std::atomic<long> g_messages{0};
    const long before = g_messages.fetch_add(static_cast<long>(count));
    if (stall_at_query > before && stall_at_query <= before + static_cast<long>(count)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    }
    if (static_cast<long>(count) == batch && ++g_full_calls == stall_call) {
        if (eagain) {
            g_eagain_until_ms.store(now_ms() + stall_ms);
            errno = EAGAIN;
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    }
    return real(fd, messages, count, flags);
}

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
    using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
    static const auto real = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    static const long fail_at = env_number("XLATPERF_SHIM_FAIL_THREAD", -1);
    static std::atomic<long> created{0};
    if (++created == fail_at) return EAGAIN;
    return real(thread, attr, start, arg);
}

extern "C" int recvmmsg(int fd, mmsghdr* messages, unsigned count, int flags, timespec* timeout) {
    using RecvmmsgFn = int (*)(int, mmsghdr*, unsigned, int, timespec*);
    static const auto real = reinterpret_cast<RecvmmsgFn>(dlsym(RTLD_NEXT, "recvmmsg"));
    static const long after_ms = env_number("XLATPERF_SHIM_RECV_AFTER_MS", -1);
    static const long stall_ms = env_number("XLATPERF_SHIM_RECV_MS", 0);
    static const long each_ms = env_number("XLATPERF_SHIM_RECV_EACH_MS", 0);
    static std::atomic<long> first_data_ms{-1};
    static std::atomic<bool> stalled{false};
    if (after_ms >= 0 && first_data_ms.load() >= 0) {
        if (stalled.load()) {
            if (each_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(each_ms));
        } else if (now_ms() - first_data_ms.load() >= after_ms) {
            stalled.store(true);
            std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
        }
    }
    const int result = real(fd, messages, count, flags, timeout);
    const std::int64_t step = step_ns();
    for (int m = 0; step != 0 && m < result; ++m) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&messages[m].msg_hdr); c != nullptr; c = CMSG_NXTHDR(&messages[m].msg_hdr, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                timespec ts{};
                std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                shift(ts, step);
                std::memcpy(CMSG_DATA(c), &ts, sizeof ts);
            }
        }
    }
    long unset = -1;
    if (result > 0) first_data_ms.compare_exchange_strong(unset, now_ms());
    return result;
}
