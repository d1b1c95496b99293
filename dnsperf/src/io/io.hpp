#pragma once
// The tester's one I/O seam. The common sender and receiver (trial.cpp) own
// the schedule, pacing, lag, the per-second series, the end time and the
// accounting buckets; an I/O backend only moves batches: it writes and sends
// queries it is given (and records them in its matching state, which is laid
// out for how it addresses flows: a ring per socket, or one flow table), and it
// reads replies, stamps each on CLOCK_MONOTONIC, has the shared ReplyClassifier
// sort it against that state and hands the outcome back. Its own drops (a
// socket's receive-buffer drops, AF_XDP's XDP_STATISTICS) the backend reports
// when the trial is over (io/backend.hpp, IoCounters), not in these statistics.
//
// Backends: io/socket_io (UDP sockets, the default) and io/xdp_io (AF_XDP),
// opened by io/backend.hpp's open_backend.

#include <cstddef>
#include <cstdint>

#include "reply.hpp"
#include "trial.hpp"

namespace xlatperf::io {

// The common sender as a backend sees it while it sends one round.
class SendContext {
public:
    // The global query index k of the thread's j-th query.
    virtual std::uint64_t query_index(std::uint64_t j) const = 0;
    // When the thread's j-th query is due, CLOCK_MONOTONIC relative to the schedule start.
    virtual std::int64_t due_ns(std::uint64_t j) const = 0;
    virtual std::int64_t start_ns() const = 0;
    // Queries j .. j+n-1 left in one call that started at before_ns and returned at after_ns
    // (relative to the start); they are stamped sent_at_ns (CLOCK_MONOTONIC).
    virtual void sent(std::uint64_t j, std::size_t n, std::int64_t before_ns, std::int64_t after_ns,
                      std::int64_t sent_at_ns) = 0;
    // True when the backend must give up what it has left: past the send bound, or halted.
    virtual bool stop_now() = 0;
    virtual SenderStats& stats() = 0;

protected:
    ~SendContext() = default;
};

class SendIo {
public:
    virtual ~SendIo() = default;
    // Most queries one send() should carry (the sender sends more in further rounds).
    virtual std::uint64_t round_limit() const = 0;
    // Sends the thread's queries j .. j+count-1 in order; any it gives up count as unsent.
    virtual void send(std::uint64_t j, std::uint64_t count, SendContext& context) = 0;
};

// The common receiver's accounting, called once per reply read.
class ReplySink {
public:
    // `channel`: the socket (or flow) it arrived on, as the backend numbers them.
    virtual void reply(const Outcome& outcome, std::int64_t received_ns, std::size_t channel) = 0;

protected:
    ~ReplySink() = default;
};

class ReceiveIo {
public:
    virtual ~ReceiveIo() = default;
    // Reads what is waiting (a bounded amount, so a flood cannot hold the receiver past its
    // end time), sorting each reply to `sink`; returns the messages read.
    virtual std::size_t drain(ReplySink& sink) = 0;
    // Blocks until something may be readable, at most `timeout_ns`.
    virtual void wait(std::int64_t timeout_ns) = 0;
    // Something is waiting now.
    virtual bool pending() = 0;
};

}  // namespace xlatperf::io
