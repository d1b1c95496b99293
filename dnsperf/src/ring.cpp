#include "ring.hpp"

#include <stdexcept>

namespace xlatperf {

namespace {

std::uint32_t checked_size(std::uint32_t slots) {
    if (slots == 0 || (slots & (slots - 1)) != 0 || slots > 65536) {
        throw std::invalid_argument("outstanding ring size must be a power of two up to 65536");
    }
    return slots;
}

}  // namespace

OutstandingRing::OutstandingRing(std::uint32_t slots)
    : mask_(checked_size(slots) - 1), slots_(std::make_unique<Slot[]>(slots)) {}

bool OutstandingRing::publish(std::uint64_t sequence, std::uint64_t query_index, std::int64_t sent_ns,
                              std::int64_t timeout_ns) {
    Slot& slot = slots_[sequence & mask_];
    const std::uint64_t old = slot.tag.load(std::memory_order_relaxed);
    const bool overrun = static_cast<State>(old & 3u) == State::outstanding &&
                         sent_ns - slot.sent_ns.load(std::memory_order_relaxed) < timeout_ns;
    // Seqlock write without fences (so that ThreadSanitizer can follow it; on x86
    // release stores and acquire loads are plain moves): a reader whose acquire
    // load sees a field written here also sees the WRITING tag stored before it.
    slot.tag.store(make_tag(sequence, State::writing), std::memory_order_relaxed);
    slot.query_index.store(query_index, std::memory_order_release);
    slot.sent_ns.store(sent_ns, std::memory_order_release);
    slot.left_ns.store(0, std::memory_order_release);
    slot.tag.store(make_tag(sequence, State::outstanding), std::memory_order_release);
    return overrun;
}

void OutstandingRing::set_left(std::uint64_t sequence, std::int64_t left_ns) {
    // Not a seqlock write: the tag stays, so a reader sees 0 or this value, both
    // true of this query; a later publish to the slot changes the tag first.
    slots_[sequence & mask_].left_ns.store(left_ns, std::memory_order_release);
}

void OutstandingRing::retract(std::uint64_t sequence) {
    slots_[sequence & mask_].tag.store(make_tag(sequence, State::empty), std::memory_order_release);
}

OutstandingRing::Lookup OutstandingRing::find(std::uint16_t id, Snapshot& out) const {
    const Slot& slot = slots_[id & mask_];
    const std::uint64_t tag = slot.tag.load(std::memory_order_acquire);
    const auto state = static_cast<State>(tag & 3u);
    if ((state != State::outstanding && state != State::answered) ||
        static_cast<std::uint16_t>(tag >> 2) != id) {
        return Lookup::unknown;
    }
    out.tag = tag;
    out.query_index = slot.query_index.load(std::memory_order_acquire);
    out.sent_ns = slot.sent_ns.load(std::memory_order_acquire);
    out.left_ns = slot.left_ns.load(std::memory_order_acquire);
    // Seqlock read: if the fields came from a rewrite, the tag has changed.
    if (slot.tag.load(std::memory_order_relaxed) != tag) return Lookup::unknown;
    return state == State::answered ? Lookup::answered : Lookup::outstanding;
}

bool OutstandingRing::mark_answered(const Snapshot& snapshot) {
    Slot& slot = slots_[snapshot.sequence() & mask_];
    std::uint64_t expected = snapshot.tag;
    return slot.tag.compare_exchange_strong(expected, make_tag(snapshot.sequence(), State::answered),
                                            std::memory_order_acq_rel, std::memory_order_relaxed);
}

}  // namespace xlatperf
