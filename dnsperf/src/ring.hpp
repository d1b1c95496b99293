#pragma once
// The queries of one socket that may still get a reply, shared by the socket's
// sender (writes) and receiver (matches replies). Its size follows the
// per-socket rate × timeout, never the trial length.
//
// The j-th query sent on a socket carries transaction ID j mod 65536 and lives in
// slot j mod size. A slot's tag holds (j << 2) | state; the sender rewrites a slot
// as a seqlock (state WRITING while its fields change), so the receiver never
// uses fields torn between two queries.

#include <atomic>
#include <cstdint>
#include <memory>

namespace xlatperf {

class OutstandingRing {
public:
    enum class State : std::uint64_t { empty = 0, writing = 1, outstanding = 2, answered = 3 };

    struct Snapshot {
        std::uint64_t tag = 0;
        std::uint64_t query_index = 0;   // global query number k (decides the QNAME)
        std::int64_t sent_ns = 0;        // CLOCK_MONOTONIC read before the send call that carried it
        std::int64_t left_ns = 0;        // when it left, interpolated within its call (0: not known)
        State state() const { return static_cast<State>(tag & 3u); }
        std::uint64_t sequence() const { return tag >> 2; }
    };

    enum class Lookup { outstanding, answered, unknown };

    // `slots` must be a power of two, at most 65536.
    explicit OutstandingRing(std::uint32_t slots);

    std::uint32_t slots() const { return mask_ + 1; }

    // Sender side. Records query `sequence` of this socket; returns true when the
    // slot still held a query sent less than `timeout_ns` before `sent_ns` that had
    // no reply yet (the ring overran: the tester sent too much too fast).
    bool publish(std::uint64_t sequence, std::uint64_t query_index, std::int64_t sent_ns, std::int64_t timeout_ns);

    // Sender side, after the send call that carried query `sequence` (published
    // before it, its slot not reused since): when within the call it left.
    void set_left(std::uint64_t sequence, std::int64_t left_ns);

    // Sender side: query `sequence` was never sent after all.
    void retract(std::uint64_t sequence);

    // Receiver side: the query with transaction `id`, if one is outstanding or
    // answered; `out` is consistent when the result is not `unknown`.
    Lookup find(std::uint16_t id, Snapshot& out) const;

    // Receiver side: marks the query of `snapshot` answered; false when the sender
    // has reused its slot meanwhile (the reply came far too late).
    bool mark_answered(const Snapshot& snapshot);

private:
    struct Slot {
        std::atomic<std::uint64_t> tag{0};
        std::atomic<std::uint64_t> query_index{0};
        std::atomic<std::int64_t> sent_ns{0};
        std::atomic<std::int64_t> left_ns{0};
    };
    static std::uint64_t make_tag(std::uint64_t sequence, State state) {
        return (sequence << 2) | static_cast<std::uint64_t>(state);
    }

    std::uint32_t mask_;
    std::unique_ptr<Slot[]> slots_;
};

}  // namespace xlatperf
