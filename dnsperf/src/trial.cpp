#include "trial.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <ostream>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>

#include "cpulist.hpp"
#include "io/backend.hpp"
#include "io/io.hpp"
#include "net.hpp"
#include "pacing.hpp"
#include "query.hpp"
#include "reply.hpp"
#include "ring.hpp"
#include "sources.hpp"

namespace xlatperf {
namespace {

constexpr std::int64_t kReceiverPollNs = 50'000'000; // a receiver re-checks its sender this often
constexpr std::int64_t kStartLeadNs = 20'000'000;    // threads start this long before query 0

// Adds to a counter only this thread writes, readable by the progress printer.
void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

double thread_cpu_s() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void name_and_pin(const std::string& name, int cpu) {
    pthread_setname_np(pthread_self(), name.c_str());
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<unsigned>(cpu), &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
}

constexpr std::int64_t kBurstWindowNs = 100'000;     // burstiness: most queries sent in any 100 us

// Queries sent within the last `window_ns`, from (time, count) of each sendmmsg
// call; a fixed ring (no allocation in the send loop) of the newest calls.
class SlidingCount {
public:
    explicit SlidingCount(std::int64_t window_ns) : window_ns_(window_ns) {}
    void add(std::int64_t at_ns, std::uint64_t count) {
        while (size_ > 0 && at_ns - times_[head_] >= window_ns_) drop_oldest();
        if (size_ == times_.size()) drop_oldest();  // more calls than fit: the window undercounts
        const std::size_t at = (head_ + size_) % times_.size();
        times_[at] = at_ns;
        counts_[at] = count;
        ++size_;
        total_ += count;
    }
    std::uint64_t total() const { return total_; }

private:
    void drop_oldest() {
        total_ -= counts_[head_];
        head_ = (head_ + 1) % times_.size();
        --size_;
    }
    std::int64_t window_ns_;
    std::array<std::int64_t, 4096> times_{};
    std::array<std::uint64_t, 4096> counts_{};
    std::size_t head_ = 0;
    std::size_t size_ = 0;
    std::uint64_t total_ = 0;
};

// Everything one sender/receiver pair shares.
struct Pair {
    unsigned index = 0;
    std::unique_ptr<io::SendIo> send_io;            // the I/O backend's two halves
    std::unique_ptr<io::ReceiveIo> receive_io;
    const io::Backend* backend = nullptr;           // names the channels
    std::uint64_t channels = 0;                     // sockets, or flows
    std::atomic<bool> sender_done{false};
    std::atomic<std::int64_t> last_send_ns{-1};   // monotonic, relative to start
    std::atomic<bool> receiver_done{false};
    std::atomic<std::uint64_t> live_sent{0};
    std::atomic<std::uint64_t> live_valid{0};
    std::atomic<std::uint64_t> live_replies{0};
    std::vector<std::uint64_t> sent_per_second;     // written by the sender
    std::vector<SeriesRow> reply_rows;              // written by the receiver
    LatencyHistogram latency;
    LatencyHistogram send_lag;
    PairResult result;
    std::string sender_failure;                     // an exception that escaped a thread
    std::string receiver_failure;

    explicit Pair(std::uint64_t max_latency_ns) : latency(max_latency_ns), send_lag(kMaxLagRecordedNs) {}
};

struct Shared {
    const Plan& plan;
    const Schedule schedule;
    const QueryTemplate query;
    std::atomic<bool> halt{false};   // senders stop early (signal, a failed start, a thread that threw)
    std::atomic<bool> signalled{false};  // of them: a signal
    std::atomic<std::size_t> ready{0};  // threads started and waiting for `go`
    std::atomic<bool> go{false};        // start_ns is set: the threads may run
    std::atomic<bool> case_warned{false};  // the case-rewrite warning went to stderr (once per run)
    std::int64_t start_ns = 0;        // monotonic time of query 0
    std::int64_t start_real_ns = 0;   // the same instant on CLOCK_REALTIME
    std::int64_t give_up_ns = 0;      // senders stop here whatever is left (relative to start): the send bound
    std::size_t series_rows = 0;
};

// The row of the per-second series a CLOCK_MONOTONIC time falls in.
std::size_t second_of(const Shared& shared, std::int64_t monotonic_at_ns) {
    const std::int64_t offset = monotonic_at_ns - shared.start_ns;
    if (offset <= 0) return 0;
    return std::min(static_cast<std::size_t>(offset / 1'000'000'000), shared.series_rows - 1);
}

// The common sender: the schedule, pacing, the send bound, lag and the per-second
// series; the pair's SendIo moves each round of due queries.
class Sender final : public io::SendContext {
public:
    Sender(Shared& shared, Pair& pair) : shared_(shared), pair_(pair), stats_(pair.result.send) {}

    void run() {
        const unsigned thread = pair_.index;
        const std::uint64_t total = shared_.schedule.thread_queries(thread);
        const std::int64_t tick_ns = std::llround(shared_.plan.config.send_tick_s * 1e9);
        io::SendIo& send_io = *pair_.send_io;
        const std::uint64_t most = send_io.round_limit();
        Pacer pacer;
        std::uint64_t j = 0;
        std::int64_t last_batch_ns = shared_.start_ns - tick_ns;
        while (j < total && !shared_.halt.load(std::memory_order_relaxed)) {
            const std::int64_t deadline = deadline_of(j);
            std::int64_t now = monotonic_ns();
            if (now < deadline) {
                // At high rates wait a whole tick so that one send call carries many queries.
                pacer.wait_until(std::max(deadline, last_batch_ns + tick_ns), shared_.halt);
                ++stats_.wakeups;
                now = monotonic_ns();
            }
            if (past_bound(now)) break;
            // Send everything due now (the backend spreads it over its sockets or flows), before
            // sleeping again; queries that fell due meanwhile (a stall) go in another round. A
            // sender far behind never sleeps: the bound is checked every round.
            last_batch_ns = now;
            std::uint64_t burst = 0;
            for (;;) {
                std::uint64_t due = 0;
                while (j + due < total && due < most && deadline_of(j + due) <= now) ++due;
                if (due == 0) break;
                send_io.send(j, due, *this);
                j += due;
                burst += due;
                if (due < most || shared_.halt.load(std::memory_order_relaxed)) break;
                now = monotonic_ns();
                if (past_bound(now)) break;
            }
            stats_.max_burst = std::max(stats_.max_burst, burst);
            if (stats_.gave_up) break;
        }
        stats_.unsent += total - std::min(total, j);
        stats_.stopped_ns = monotonic_ns() - shared_.start_ns;
        if (j < total && !stats_.gave_up) {
            stats_.stop = shared_.signalled.load(std::memory_order_relaxed) ? SendStop::signal : SendStop::failure;
        }
    }

    // io::SendContext
    std::uint64_t query_index(std::uint64_t j) const override { return shared_.schedule.global_index(pair_.index, j); }
    std::int64_t due_ns(std::uint64_t j) const override { return deadline_of(j) - shared_.start_ns; }
    std::int64_t start_ns() const override { return shared_.start_ns; }
    void sent(std::uint64_t j, std::size_t n, std::int64_t before_ns, std::int64_t after_ns,
              std::int64_t sent_at_ns) override {
        record_sent(n, before_ns, after_ns, sent_at_ns, deadline_of(j) - shared_.start_ns,
                    deadline_of(j + n - 1) - shared_.start_ns);
    }
    bool stop_now() override {
        return past_bound(monotonic_ns()) || shared_.halt.load(std::memory_order_relaxed);
    }
    SenderStats& stats() override { return stats_; }

private:
    // True (and the sender marked as stopped at the bound) once `now` is past the send bound.
    bool past_bound(std::int64_t now) {
        if (now - shared_.start_ns <= shared_.give_up_ns) return false;
        stats_.gave_up = true;
        stats_.stop = SendStop::bound;
        return true;
    }

    std::int64_t deadline_of(std::uint64_t j) const {
        return shared_.start_ns + shared_.schedule.offset_ns(shared_.schedule.global_index(pair_.index, j));
    }

    // n queries went out in one send call that started at before_ns and returned at
    // after_ns; the first of them was due at first_due_ns, the last at last_due_ns
    // (all from the start). The call's lag is the larger of its first query's delay at
    // the call's start and its last query's at the call's end, so time spent inside
    // the call (a preempted or stalled send) counts too. Each call's lag is judged, so
    // a stall inside a burst shows even when the burst catches up.
    void record_sent(std::size_t n, std::int64_t before_ns, std::int64_t after_ns, std::int64_t sent_at_ns,
                     std::int64_t first_due_ns, std::int64_t last_due_ns) {
        const std::int64_t lag = std::max(before_ns - first_due_ns, after_ns - last_due_ns);
        pair_.send_lag.record(static_cast<std::uint64_t>(std::max<std::int64_t>(lag, 0)));
        if (lag > stats_.max_lag_ns) {
            stats_.max_lag_ns = lag;
            stats_.max_lag_at_ns = before_ns;
        }
        stats_.sent += n;
        window_.add(before_ns, n);
        stats_.max_in_100us = std::max(stats_.max_in_100us, window_.total());
        if (stats_.first_send_ns < 0) stats_.first_send_ns = before_ns;
        stats_.last_send_ns = after_ns;
        pair_.sent_per_second[second_of(shared_, sent_at_ns)] += n;
        bump(pair_.live_sent, n);
    }

    Shared& shared_;
    Pair& pair_;
    SenderStats& stats_;
    SlidingCount window_{kBurstWindowNs};
};

// The common receiver: the end time, the final drain and the accounting of every
// reply into its bucket and second; the pair's ReceiveIo reads and classifies.
class Receiver final : public io::ReplySink {
public:
    // `feeders`: the pairs whose senders' queries this receiver may get replies to (its own pair; every
    // pair when the backend's channels are shared, as AF_XDP's flows are: a reply arrives on the queue the
    // other side's hash picks). It reads until one timeout after the last of them sent its last query.
    Receiver(Shared& shared, Pair& pair, std::vector<const Pair*> feeders, bool channels_shared)
        : shared_(shared),
          pair_(pair),
          feeders_(std::move(feeders)),
          stats_(pair.result.receive),
          recv_tick_ns_(std::llround(shared.plan.config.recv_tick_s * 1e9)),
          latency_from_ns_(std::llround(shared.plan.config.latency_from_s * 1e9)) {
        // Only a socket (or flow) whose IDs wrap can see its epoch-0 answers spelled again: those
        // get a bit per ID (a pair's channels take its queries in turn, so all wrap or none do; shared
        // channels take every pair's queries in turn: the whole schedule's).
        const std::uint64_t queries = channels_shared ? shared.plan.total_queries
                                                      : shared.schedule.thread_queries(pair.index);
        const std::uint64_t per_channel = (queries + pair.channels - 1) / pair.channels;
        if (per_channel > kIdsPerEpoch) {
            epoch0_answered_.assign(pair.channels, std::vector<std::uint64_t>(kIdsPerEpoch / 64, 0));
            stats_.case_bitmap_bytes = pair.channels * (kIdsPerEpoch / 8);
        }
    }

    void run() {
        io::ReceiveIo& receive_io = *pair_.receive_io;
        std::int64_t end_ns = INT64_MAX;  // monotonic, absolute
        for (;;) {
            const std::int64_t now = monotonic_ns();
            if (end_ns == INT64_MAX) end_ns = feeders_end(now);
            if (now >= end_ns) break;
            const std::size_t got = drain();
            if (got > 0 && recv_tick_ns_ > 0) {
                // Replies are flowing: let more of them queue up and read them in one go.
                const std::int64_t until = std::min(monotonic_ns() + recv_tick_ns_, end_ns);
                const timespec ts{static_cast<time_t>(until / 1'000'000'000), static_cast<long>(until % 1'000'000'000)};
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
            } else if (got == 0) {
                // Idle: block until something is readable.
                receive_io.wait(std::min(end_ns - monotonic_ns(), kReceiverPollNs));
            }
            ++stats_.wakeups;
        }
        final_drain(end_ns);
    }

    // io::ReplySink: one reply into its bucket and its second.
    void reply(const Outcome& outcome, std::int64_t received_ns, std::size_t socket) override {
        ++stats_.received;
        note_case(socket, outcome, received_ns);
        SeriesRow& by_query = pair_.reply_rows[second_of(shared_, outcome.sent_ns)];
        SeriesRow& by_arrival = pair_.reply_rows[second_of(shared_, received_ns)];
        switch (outcome.kind) {
        case ReplyKind::valid:
            ++stats_.valid;
            ++by_query.valid;
            if (outcome.sent_ns - shared_.start_ns >= latency_from_ns_)
                pair_.latency.record(static_cast<std::uint64_t>(outcome.latency_ns));
            break;
        case ReplyKind::late:
            ++stats_.late;
            ++by_query.late;
            break;
        case ReplyKind::rcode:
            ++stats_.rcode[outcome.rcode & 0x0fu];
            ++by_query.failed;
            break;
        case ReplyKind::nodata:
            ++stats_.nodata;
            ++by_query.failed;
            break;
        case ReplyKind::truncated:
            ++stats_.truncated;
            ++by_query.failed;
            break;
        case ReplyKind::malformed:
            ++stats_.malformed;
            ++by_arrival.unmatched;
            break;
        case ReplyKind::duplicate:
            ++stats_.duplicate;
            ++by_arrival.unmatched;
            break;
        case ReplyKind::unexpected:
            ++stats_.unexpected;
            ++by_arrival.unmatched;
            if (outcome.cause == UnexpectedCause::wrong_source) ++stats_.wrong_source;
            if (outcome.cause == UnexpectedCause::unknown_id) ++stats_.unknown_id;
            if (outcome.cause == UnexpectedCause::wrong_question) ++stats_.wrong_question;
            break;
        }
    }

private:
    // INT64_MAX while a feeding sender still runs; then one timeout after the last query any of them
    // sent (now, when none sent any).
    std::int64_t feeders_end(std::int64_t now) const {
        std::int64_t last = -1;
        for (const Pair* feeder : feeders_) {
            if (!feeder->sender_done.load(std::memory_order_acquire)) return INT64_MAX;
            last = std::max(last, feeder->last_send_ns.load(std::memory_order_relaxed));
        }
        return last < 0 ? now : shared_.start_ns + last + shared_.plan.timeout_ns;
    }

    // Reads what is waiting through the backend, and updates the live counters.
    std::size_t drain() {
        const std::uint64_t valid_before = stats_.valid;
        const std::size_t got = pair_.receive_io->drain(*this);
        bump(pair_.live_replies, got);
        bump(pair_.live_valid, stats_.valid - valid_before);
        return got;
    }

    // After the end time: reads until nothing is pending, so that a receiver behind at
    // its end (preempted, or a burst of replies) still reads the replies that arrived
    // in time (their stamps judge them). It stops at one timeout past the end time at
    // the latest; what still waits then is read and set aside uncounted (its queries
    // stay unanswered), and its count (unread_at_end) is the tester's loss: the trial
    // is tester-limited.
    void final_drain(std::int64_t end_ns) {
        const std::int64_t started = monotonic_ns();
        const std::int64_t deadline = std::max(end_ns, started) + shared_.plan.timeout_ns;
        const std::uint64_t received_before = stats_.received;
        bool cut = false;
        for (;;) {
            if (drain() == 0) break;
            if (monotonic_ns() >= deadline) {
                cut = true;
                break;
            }
        }
        stats_.final_drain = stats_.received - received_before;
        stats_.final_drain_ns = monotonic_ns() - started;
        if (cut) stats_.unread_at_end = set_aside(deadline + shared_.plan.timeout_ns);
    }

    // Reads what still waits without counting it, until nothing does or `until` (monotonic); returns
    // how many messages that was (with something still waiting at `until`, one more: a lower bound).
    std::uint64_t set_aside(std::int64_t until) {
        struct Ignore final : io::ReplySink {
            void reply(const Outcome&, std::int64_t, std::size_t) override {}
        } ignore;
        std::uint64_t unread = 0;
        for (;;) {
            const std::size_t got = pair_.receive_io->drain(ignore);
            unread += got;
            if (got == 0) break;
            if (monotonic_ns() >= until) {
                if (pair_.receive_io->pending()) ++unread;
                break;
            }
        }
        return unread;
    }

    static constexpr std::uint64_t kIdsPerEpoch = 65536;

    // Keeps which epoch-0 queries got a reply and counts the replies whose letter
    // case proves that the server rewrote it; the first one is recorded and said
    // on stderr, once per run.
    void note_case(std::size_t socket, const Outcome& outcome, std::int64_t received_ns) {
        const bool matched = outcome.kind != ReplyKind::malformed && outcome.kind != ReplyKind::unexpected;
        if (matched) {
            if (!epoch0_answered_.empty() && outcome.sequence < kIdsPerEpoch) {
                epoch0_answered_[socket][outcome.sequence / 64] |= std::uint64_t{1} << (outcome.sequence % 64);
            }
            return;
        }
        if (!outcome.other_epoch) return;
        const std::uint64_t id = outcome.sequence % kIdsPerEpoch;
        const bool answered = !epoch0_answered_.empty() && ((epoch0_answered_[socket][id / 64] >> (id % 64)) & 1u) != 0;
        const CaseRewrite evidence =
            case_rewrite_evidence(outcome.sequence, outcome.spelled_epoch, shared_.query.epoch_bits(), answered);
        if (evidence == CaseRewrite::none) return;
        ++stats_.case_rewritten;
        if (stats_.case_first.seen) return;
        CaseRewriteSeen& first = stats_.case_first;
        const io::Flow where = pair_.backend->channel(pair_.index, socket);
        first = {true, socket, where.address, where.port, static_cast<std::uint16_t>(id),
                 outcome.sequence / kIdsPerEpoch, outcome.spelled_epoch, evidence, received_ns - shared_.start_ns};
        if (shared_.case_warned.exchange(true)) return;
        std::ostringstream line;
        line << "xlatperf: warning: the server rewrites the letter case of the query name: a reply to ID " << id
             << " on port " << first.port << " spells epoch " << first.spelled_epoch
             << " where its query carried epoch " << first.query_epoch
             << (evidence == CaseRewrite::never_sent ? " (no query with that ID has carried that case yet)"
                                                     : " (epoch 0's query with that ID already had its reply)")
             << "; such replies match no query (unexpected, their queries unanswered): measure with a server "
                "that echoes the case it received (RFC 4343)\n";
        std::cerr << line.str() << std::flush;
    }

    Shared& shared_;
    Pair& pair_;
    std::vector<const Pair*> feeders_;
    ReceiverStats& stats_;
    std::vector<std::vector<std::uint64_t>> epoch0_answered_;  // per socket (flow), a bit per ID: epoch 0's query answered
    std::int64_t recv_tick_ns_;
    std::int64_t latency_from_ns_;  // only queries sent this long after query 0 or later count for latency
};

int cpu_for(const std::vector<int>& cpus, unsigned index) {
    return cpus.empty() ? -1 : cpus[index % cpus.size()];
}

// Sets a flag when it goes out of scope, also when the thread body threw.
struct SetOnExit {
    std::atomic<bool>& flag;
    ~SetOnExit() { flag.store(true, std::memory_order_release); }
};

// Runs `body` as a named, pinned thread once every thread is ready (shared.go);
// records its CPU time, affinity and any escaped exception, which also halts
// the senders so that the trial ends instead of waiting for a dead thread.
template <typename Body>
std::thread start_thread(Shared& shared, std::string& failure, std::string name, int cpu, double& cpu_s,
                         int& last_cpu, std::vector<int>& allowed, Body body) {
    try {
        return std::thread([&shared, &failure, name, cpu, &cpu_s, &last_cpu, &allowed, body]() mutable {
            name_and_pin(name, cpu);
            allowed = allowed_cpus();
            shared.ready.fetch_add(1, std::memory_order_acq_rel);
            while (!shared.go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(50));
            try {
                body();
            } catch (const std::exception& e) {
                failure = name + ": " + e.what();
                shared.halt.store(true);
            }
            cpu_s = thread_cpu_s();
            last_cpu = sched_getcpu();
        });
    } catch (const std::system_error& e) {
        throw StartError(std::string("cannot start thread ") + name + ": " + e.what());
    }
}

void print_progress(std::ostream& out, const std::vector<std::unique_ptr<Pair>>& pairs, unsigned second,
                    std::uint64_t& last_sent, std::uint64_t& last_valid, std::uint64_t& last_replies) {
    std::uint64_t sent = 0, valid = 0, replies = 0;
    for (const auto& pair : pairs) {
        sent += pair->live_sent.load(std::memory_order_relaxed);
        valid += pair->live_valid.load(std::memory_order_relaxed);
        replies += pair->live_replies.load(std::memory_order_relaxed);
    }
    std::ostringstream line;
    line << "xlatperf: [" << std::setw(4) << second << " s] sent " << sent - last_sent << " queries/s, valid "
         << valid - last_valid << " replies/s, other " << (replies - valid) - (last_replies - last_valid)
         << " datagrams/s | so far: sent " << sent << ", valid " << valid << ", not (yet) valid "
         << (sent > valid ? sent - valid : 0) << " queries\n";
    out << line.str() << std::flush;
    last_sent = sent;
    last_valid = valid;
    last_replies = replies;
}

// Every pair with its I/O backend's two halves, sized before the first query.
std::vector<std::unique_ptr<Pair>> make_pairs(const Shared& shared, io::Backend& backend,
                                              std::uint64_t max_latency_ns) {
    const Plan& plan = shared.plan;
    std::vector<std::unique_ptr<Pair>> pairs;
    for (unsigned i = 0; i < plan.config.threads; ++i) {
        auto pair = std::make_unique<Pair>(max_latency_ns);
        pair->index = i;
        pair->result.index = i;
        pair->result.sender_cpu = cpu_for(plan.sender_cpus, i);
        pair->result.receiver_cpu = cpu_for(plan.receiver_cpus, i);
        pair->backend = &backend;
        pair->channels = backend.channels(i);
        backend.describe(i, pair->result);
        pair->send_io = backend.sender(i, pair->result.send);
        pair->receive_io = backend.receiver(i, pair->result.receive);
        pair->sent_per_second.assign(shared.series_rows, 0);
        pair->reply_rows.assign(shared.series_rows, SeriesRow{});
        pairs.push_back(std::move(pair));
    }
    return pairs;
}

// Starts every receiver, then every sender; they wait for shared.go.
void start_threads(Shared& shared, std::vector<std::unique_ptr<Pair>>& pairs,
                   std::vector<std::unique_ptr<Sender>>& senders, std::vector<std::unique_ptr<Receiver>>& receivers,
                   std::vector<std::thread>& threads) {
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        Pair& pair = *pairs[i];
        Receiver& receiver = *receivers[i];
        threads.push_back(start_thread(shared, pair.receiver_failure, "xlp-recv-" + std::to_string(i),
                                       pair.result.receiver_cpu, pair.result.receive.cpu_s,
                                       pair.result.receive.last_cpu, pair.result.receiver_allowed, [&pair, &receiver] {
                                           const SetOnExit done{pair.receiver_done};
                                           receiver.run();
                                       }));
    }
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        Pair& pair = *pairs[i];
        Sender& sender = *senders[i];
        threads.push_back(start_thread(shared, pair.sender_failure, "xlp-send-" + std::to_string(i),
                                       pair.result.sender_cpu, pair.result.send.cpu_s, pair.result.send.last_cpu,
                                       pair.result.sender_allowed, [&pair, &sender] {
                                           const SetOnExit done{pair.sender_done};
                                           sender.run();
                                           pair.last_send_ns.store(pair.result.send.last_send_ns,
                                                                   std::memory_order_relaxed);
                                       }));
    }
}

// Waits until every thread is ready, then fixes the schedule start and lets them go.
void release_threads(Shared& shared, std::size_t thread_count) {
    while (shared.ready.load(std::memory_order_acquire) < thread_count) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    shared.start_ns = monotonic_ns() + kStartLeadNs;
    shared.start_real_ns = shared.start_ns + (realtime_ns() - monotonic_ns());
    shared.go.store(true, std::memory_order_release);
}

// Progress, once per second of the schedule, until every receiver has finished.
void wait_with_progress(Shared& shared, const std::vector<std::unique_ptr<Pair>>& pairs, std::ostream* progress,
                        const std::atomic<bool>& stop) {
    std::uint64_t last_sent = 0, last_valid = 0, last_replies = 0;
    unsigned second = 1;
    for (;;) {
        if (stop.load(std::memory_order_relaxed)) {
            shared.signalled.store(true, std::memory_order_relaxed);
            shared.halt.store(true, std::memory_order_relaxed);
        }
        const bool all_done = std::all_of(pairs.begin(), pairs.end(), [](const auto& p) {
            return p->receiver_done.load(std::memory_order_acquire);
        });
        if (all_done) break;
        const std::int64_t next = shared.start_ns + std::int64_t{second} * 1'000'000'000;
        const std::int64_t now = monotonic_ns();
        if (now >= next) {
            if (progress != nullptr) print_progress(*progress, pairs, second, last_sent, last_valid, last_replies);
            ++second;
            continue;
        }
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::int64_t>(next - now, 20'000'000)));
    }
}

// Per-pair results, the latency and lag histograms, the per-second series.
void merge_pairs(const Shared& shared, std::vector<std::unique_ptr<Pair>>& pairs, TrialResult& result) {
    result.series.assign(shared.series_rows, SeriesRow{});
    std::size_t used_rows = 0;
    for (auto& pair : pairs) {
        for (const auto* failure : {&pair->sender_failure, &pair->receiver_failure}) {
            if (!failure->empty()) throw std::runtime_error(*failure);
        }
        result.latency.merge(pair->latency);
        result.send_lag.merge(pair->send_lag);
        for (std::size_t r = 0; r < shared.series_rows; ++r) {
            SeriesRow& row = result.series[r];
            const SeriesRow& replies = pair->reply_rows[r];
            row.sent += pair->sent_per_second[r];
            row.valid += replies.valid;
            row.late += replies.late;
            row.failed += replies.failed;
            row.unmatched += replies.unmatched;
            if (pair->sent_per_second[r] || replies.valid || replies.late || replies.failed || replies.unmatched) {
                used_rows = std::max(used_rows, r + 1);
            }
        }
        result.pairs.push_back(pair->result);
    }
    result.series.resize(used_rows);
}

double seconds_between(const timeval& a, const timeval& b) {
    return static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_usec - a.tv_usec) / 1e6;
}

}  // namespace

const char* send_stop_name(SendStop stop) {
    switch (stop) {
    case SendStop::schedule_sent: return "schedule-sent";
    case SendStop::bound: return "send-bound";
    case SendStop::signal: return "signal";
    case SendStop::failure: return "thread-failure";
    }
    return "unknown";
}

TrialResult run_trial(const Plan& plan, std::ostream* progress, const std::atomic<bool>& stop) {
    const Config& config = plan.config;
    Shared shared{plan, Schedule(config.rate_qps, config.threads, plan.total_queries),
                  QueryTemplate(config.domain, plan.qtype)};
    // A sender that cannot keep up stops at the send bound (window + tolerance + --max-lag).
    shared.give_up_ns = std::llround(plan.send_bound_s * 1e9);
    shared.series_rows = plan.series_rows;

    const auto max_latency_ns = static_cast<std::uint64_t>(2 * plan.timeout_ns);
    TrialResult result;
    // The I/O backend is set up before any thread and taken down after every thread ended (it outlives
    // the pairs).
    const std::unique_ptr<io::Backend> backend = io::open_backend(plan, shared.query);
    std::vector<std::unique_ptr<Pair>> pairs = make_pairs(shared, *backend, max_latency_ns);
    std::vector<std::unique_ptr<Sender>> senders;
    std::vector<std::unique_ptr<Receiver>> receivers;
    std::vector<const Pair*> every_pair;
    for (const auto& pair : pairs) every_pair.push_back(pair.get());
    const bool shared_channels = backend->channels_shared();
    for (auto& pair : pairs) {
        senders.push_back(std::make_unique<Sender>(shared, *pair));
        receivers.push_back(std::make_unique<Receiver>(
            shared, *pair, shared_channels ? every_pair : std::vector<const Pair*>{pair.get()}, shared_channels));
    }

    std::vector<std::thread> threads;
    // If starting a thread fails, the ones already running are released, stop early and are joined.
    struct Joiner {
        std::vector<std::thread>& threads;
        Shared& shared;
        std::vector<std::unique_ptr<Pair>>& pairs;
        ~Joiner() {
            shared.halt.store(true);
            shared.go.store(true, std::memory_order_release);
            // A receiver whose sender never started must not wait for it.
            for (auto& pair : pairs) pair->sender_done.store(true, std::memory_order_release);
            for (auto& t : threads)
                if (t.joinable()) t.join();
        }
    } joiner{threads, shared, pairs};
    start_threads(shared, pairs, senders, receivers, threads);
    rusage usage_before{};
    getrusage(RUSAGE_SELF, &usage_before);
    const UdpErrorCounters udp_before = read_udp_error_counters();
    const std::vector<int> egress = backend->egress_devices();
    std::vector<DeviceDrops> egress_before;
    for (const int device : egress) egress_before.push_back(read_device_drops(device));
    release_threads(shared, threads.size());
    result.start_realtime_ns = shared.start_real_ns;
    wait_with_progress(shared, pairs, progress, stop);
    for (auto& t : threads) t.join();
    const std::int64_t end_ns = monotonic_ns();
    const UdpErrorCounters udp_after = read_udp_error_counters();
    for (std::size_t d = 0; d < egress.size(); ++d) {
        result.egress.push_back(egress_delta(egress_before[d], read_device_drops(egress[d])));
    }
    UdpErrorCounters udp;  // the namespace's increase over the trial
    udp.read = udp_before.read && udp_after.read;
    if (udp.read) {
        const auto delta = [](std::uint64_t after, std::uint64_t before) { return after - std::min(after, before); };
        udp.checksum_errors = delta(udp_after.checksum_errors, udp_before.checksum_errors);
        udp.rcvbuf_errors = delta(udp_after.rcvbuf_errors, udp_before.rcvbuf_errors);
        udp.sndbuf_errors = delta(udp_after.sndbuf_errors, udp_before.sndbuf_errors);
    }
    result.udp_counters_read = udp.read;
    result.udp_sndbuf_errors = udp.sndbuf_errors;

    rusage usage_after{};
    getrusage(RUSAGE_SELF, &usage_after);
    result.cpu_user_s = seconds_between(usage_before.ru_utime, usage_after.ru_utime);
    result.cpu_system_s = seconds_between(usage_before.ru_stime, usage_after.ru_stime);
    result.max_rss_kib = usage_after.ru_maxrss;
    result.wall_s = static_cast<double>(end_ns - shared.start_ns) / 1e9;
    result.interrupted = stop.load();
    result.io = backend->finish(udp);
    result.latency = LatencyHistogram(max_latency_ns);
    result.latency_from_s = plan.config.latency_from_s;
    result.send_lag = LatencyHistogram(kMaxLagRecordedNs);
    merge_pairs(shared, pairs, result);
    return result;
}

}  // namespace xlatperf
